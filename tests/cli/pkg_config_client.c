/* A client built with `pkg-config --cflags --libs libibverbs librdmacm`
 * against an installed softrdma prefix: lists the devices, queries port 1,
 * creates an rdma_cm event channel, and says which libibverbs it loaded. */
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  int n = 0;
  struct ibv_device** list = ibv_get_device_list(&n);
  if (!list || n < 1) {
    fprintf(stderr, "no RDMA device\n");
    return 1;
  }
  struct ibv_context* ctx = ibv_open_device(list[0]);
  struct ibv_device_attr attr;
  struct ibv_port_attr port;
  if (!ctx || ibv_query_device(ctx, &attr) || ibv_query_port(ctx, 1, &port)) {
    fprintf(stderr, "cannot open or query %s\n", ibv_get_device_name(list[0]));
    return 2;
  }
  struct rdma_event_channel* channel = rdma_create_event_channel();
  if (!channel) {
    fprintf(stderr, "rdma_create_event_channel failed\n");
    return 3;
  }
  rdma_destroy_event_channel(channel);
  printf("device %s port 1 %s\n", ibv_get_device_name(list[0]), ibv_port_state_str(port.state));
  ibv_close_device(ctx);
  ibv_free_device_list(list);

  FILE* maps = fopen("/proc/self/maps", "r");
  char line[4096];
  while (maps && fgets(line, sizeof line, maps)) {
    char* path = strchr(line, '/');
    if (path && strstr(path, "/libibverbs.so")) {
      printf("loaded %s", path);
      break;
    }
  }
  if (maps) fclose(maps);
  return 0;
}
