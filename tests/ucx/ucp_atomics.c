// UCP atomics with their results checked, which ucx_perftest does not do.
//
//   ucp_atomics server PORT       exposes a 64-bit and a 32-bit word, serves
//                                 until the client is done, then checks them
//   ucp_atomics client HOST PORT  runs fetch-add, swap, compare-and-swap (hit
//                                 and miss) and add on both words, checking
//                                 every fetched value, then a get of each
//
// The two processes exchange UCP worker addresses and the packed remote key
// over one TCP connection; the atomics travel over whatever UCX_TLS selects.
// Operands have bits set in every byte so that a byte-order or width mistake
// anywhere (UCP, UCT or the verbs library) changes a value. Each process
// prints "OK" as its last line when every check passed and exits 0; any
// mismatch is printed and exits 1.
#include <arpa/inet.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

enum { kAdds = 100 };
static const uint64_t kInit64 = 0x1000000200000003ull;
static const uint32_t kInit32 = 0x10000003u;

struct Target {  // the server's exposed memory
  uint64_t word64;
  uint32_t word32;
  uint32_t pad;
};

static int failures;

static void die(const char* what) {
  fprintf(stderr, "ucp_atomics: %s\n", what);
  exit(2);
}

static void check_status(ucs_status_t st, const char* what) {
  if (st != UCS_OK) {
    fprintf(stderr, "ucp_atomics: %s: %s\n", what, ucs_status_string(st));
    exit(2);
  }
}

static void expect(const char* what, uint64_t got, uint64_t want) {
  if (got == want) return;
  printf("MISMATCH %s: got 0x%" PRIx64 ", expected 0x%" PRIx64 "\n", what, got, want);
  ++failures;
}

// Whole-buffer socket I/O: the exchange is a handful of small messages.
static void send_all(int fd, const void* buf, size_t len) {
  const char* p = buf;
  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n <= 0) die("send on the control connection failed");
    p += n;
    len -= (size_t)n;
  }
}

static void recv_all(int fd, void* buf, size_t len) {
  char* p = buf;
  while (len > 0) {
    ssize_t n = recv(fd, p, len, 0);
    if (n <= 0) die("the control connection closed early");
    p += n;
    len -= (size_t)n;
  }
}

static void send_blob(int fd, const void* data, uint64_t len) {
  send_all(fd, &len, sizeof len);
  send_all(fd, data, len);
}

static void* recv_blob(int fd, uint64_t* len) {
  recv_all(fd, len, sizeof *len);
  if (*len > (1u << 20)) die("oversized blob on the control connection");
  void* data = malloc(*len ? *len : 1);
  if (!data) die("out of memory");
  recv_all(fd, data, *len);
  return data;
}

static void setup(ucp_context_h* ctx, ucp_worker_h* worker) {
  ucp_params_t params = {0};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_AMO32 | UCP_FEATURE_AMO64 | UCP_FEATURE_RMA;
  check_status(ucp_init(&params, NULL, ctx), "ucp_init");
  ucp_worker_params_t wparams = {0};
  wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wparams.thread_mode = UCS_THREAD_MODE_SINGLE;
  check_status(ucp_worker_create(*ctx, &wparams, worker), "ucp_worker_create");
}

static ucp_ep_h connect_ep(ucp_worker_h worker, const void* peer_address) {
  ucp_ep_params_t ep_params = {0};
  ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
  ep_params.address = peer_address;
  ucp_ep_h ep;
  check_status(ucp_ep_create(worker, &ep_params, &ep), "ucp_ep_create");
  return ep;
}

static void wait_request(ucp_worker_h worker, ucs_status_ptr_t req, const char* what) {
  if (req == NULL) return;
  if (UCS_PTR_IS_ERR(req)) check_status(UCS_PTR_STATUS(req), what);
  ucs_status_t st;
  while ((st = ucp_request_check_status(req)) == UCS_INPROGRESS) ucp_worker_progress(worker);
  ucp_request_free(req);
  check_status(st, what);
}

static void close_ep(ucp_worker_h worker, ucp_ep_h ep) {
  ucp_request_param_t param = {0};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_EP_CLOSE_FLAG_FORCE;
  ucs_status_ptr_t req = ucp_ep_close_nbx(ep, &param);
  if (req && !UCS_PTR_IS_ERR(req)) {
    while (ucp_request_check_status(req) == UCS_INPROGRESS) ucp_worker_progress(worker);
    ucp_request_free(req);
  }
}

// One atomic on the remote word of `size` bytes at `remote`; *result gets the
// old value for fetching operations (reply != NULL).
static void atomic_op(ucp_worker_h worker, ucp_ep_h ep, ucp_atomic_op_t op, uint64_t operand,
                      void* reply, size_t size, uint64_t remote, ucp_rkey_h rkey,
                      const char* what) {
  uint64_t op64 = operand;
  uint32_t op32 = (uint32_t)operand;
  ucp_request_param_t param = {0};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
  param.datatype = ucp_dt_make_contig(size);
  if (reply) {
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_REPLY_BUFFER;
    param.reply_buffer = reply;
  }
  const void* buf = size == 8 ? (const void*)&op64 : (const void*)&op32;
  wait_request(worker, ucp_atomic_op_nbx(ep, op, buf, 1, remote, rkey, &param), what);
}

static uint64_t fetch_op(ucp_worker_h w, ucp_ep_h ep, ucp_atomic_op_t op, uint64_t operand,
                         uint64_t compare, size_t size, uint64_t remote, ucp_rkey_h rkey,
                         const char* what) {
  // For CSWAP the reply buffer holds the swap value on input (UCP's rule).
  uint64_t r64 = op == UCP_ATOMIC_OP_CSWAP ? operand : 0;
  uint32_t r32 = (uint32_t)r64;
  void* reply = size == 8 ? (void*)&r64 : (void*)&r32;
  atomic_op(w, ep, op, op == UCP_ATOMIC_OP_CSWAP ? compare : operand, reply, size, remote, rkey,
            what);
  return size == 8 ? r64 : r32;
}

// The sequence on one word; returns the value the word must hold at the end.
static uint64_t run_sequence(ucp_worker_h w, ucp_ep_h ep, size_t size, uint64_t remote,
                             ucp_rkey_h rkey) {
  const uint64_t mask = size == 8 ? ~0ull : 0xffffffffull;
  const char* tag = size == 8 ? "64-bit" : "32-bit";
  char what[64];
  uint64_t cur = size == 8 ? kInit64 : kInit32;

  const uint64_t add = 0x0102030405060708ull & mask;
  snprintf(what, sizeof what, "%s fetch-add", tag);
  expect(what, fetch_op(w, ep, UCP_ATOMIC_OP_ADD, add, 0, size, remote, rkey, what), cur);
  cur = (cur + add) & mask;

  const uint64_t swap = 0xfedcba9876543210ull & mask;
  snprintf(what, sizeof what, "%s swap", tag);
  expect(what, fetch_op(w, ep, UCP_ATOMIC_OP_SWAP, swap, 0, size, remote, rkey, what), cur);
  cur = swap;

  const uint64_t cswap_new = 0x0f1e2d3c4b5a6978ull & mask;
  snprintf(what, sizeof what, "%s compare-and-swap (equal)", tag);
  expect(what, fetch_op(w, ep, UCP_ATOMIC_OP_CSWAP, cswap_new, cur, size, remote, rkey, what), cur);
  cur = cswap_new;

  snprintf(what, sizeof what, "%s compare-and-swap (different)", tag);
  expect(what,
         fetch_op(w, ep, UCP_ATOMIC_OP_CSWAP, 0x1111111111111111ull & mask, cur ^ 1, size, remote,
                  rkey, what),
         cur);

  // Non-fetching adds, each with a carry across bytes; then a fetch-add of 0
  // reads the sum.
  const uint64_t small = 0x1ff;
  snprintf(what, sizeof what, "%s add", tag);
  for (int i = 0; i < kAdds; ++i)
    atomic_op(w, ep, UCP_ATOMIC_OP_ADD, small, NULL, size, remote, rkey, what);
  cur = (cur + kAdds * small) & mask;
  snprintf(what, sizeof what, "%s fetch-add 0 after %d adds", tag, kAdds);
  expect(what, fetch_op(w, ep, UCP_ATOMIC_OP_ADD, 0, 0, size, remote, rkey, what), cur);

  // A plain RMA read sees the same value.
  uint64_t got64 = 0;
  uint32_t got32 = 0;
  ucp_request_param_t param = {0};
  snprintf(what, sizeof what, "%s get", tag);
  wait_request(
      w, ucp_get_nbx(ep, size == 8 ? (void*)&got64 : (void*)&got32, size, remote, rkey, &param),
      what);
  expect(what, size == 8 ? got64 : got32, cur);
  return cur;
}

static int tcp_listen(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, (struct sockaddr*)&a, sizeof a) != 0 || listen(fd, 1) != 0)
    die("cannot listen on the control port");
  return fd;
}

static int tcp_connect(const char* host, const char* port) {
  struct addrinfo hints = {0}, *res;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host, port, &hints, &res) != 0) die("cannot resolve the server");
  int fd = socket(res->ai_family, SOCK_STREAM, 0);
  if (connect(fd, res->ai_addr, res->ai_addrlen) != 0) die("cannot connect to the server");
  freeaddrinfo(res);
  return fd;
}

static int server(int port) {
  ucp_context_h ctx;
  ucp_worker_h worker;
  setup(&ctx, &worker);
  static struct Target target __attribute__((aligned(64)));
  target.word64 = kInit64;
  target.word32 = kInit32;
  ucp_mem_map_params_t mp = {0};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  mp.address = &target;
  mp.length = sizeof target;
  ucp_mem_h memh;
  check_status(ucp_mem_map(ctx, &mp, &memh), "ucp_mem_map");
  void* rkey_buf;
  size_t rkey_len;
  check_status(ucp_rkey_pack(ctx, memh, &rkey_buf, &rkey_len), "ucp_rkey_pack");
  ucp_address_t* addr;
  size_t addr_len;
  check_status(ucp_worker_get_address(worker, &addr, &addr_len), "ucp_worker_get_address");

  int lfd = tcp_listen(port);
  int fd = accept(lfd, NULL, NULL);
  if (fd < 0) die("accept failed");
  send_blob(fd, addr, addr_len);
  send_blob(fd, rkey_buf, rkey_len);
  uint64_t base = (uintptr_t)&target;
  send_all(fd, &base, sizeof base);
  uint64_t peer_len;
  void* peer = recv_blob(fd, &peer_len);
  // An endpoint back to the client: atomics UCP carries itself are answered
  // through it.
  ucp_ep_h ep = connect_ep(worker, peer);

  // Progress until the client reports its expected final values.
  struct pollfd pfd = {.fd = fd, .events = POLLIN};
  while (poll(&pfd, 1, 0) == 0) ucp_worker_progress(worker);
  uint64_t want[2];
  recv_all(fd, want, sizeof want);
  expect("64-bit word in the server's memory", __atomic_load_n(&target.word64, __ATOMIC_ACQUIRE),
         want[0]);
  expect("32-bit word in the server's memory", __atomic_load_n(&target.word32, __ATOMIC_ACQUIRE),
         want[1]);
  char ack = failures ? 'F' : 'K';
  send_all(fd, &ack, 1);
  // Keep progressing until the client closes: its endpoint close handshake
  // may need us.
  for (;;) {
    ucp_worker_progress(worker);
    if (poll(&pfd, 1, 0) > 0) {
      char c;
      if (recv(fd, &c, 1, 0) <= 0) break;
    }
  }
  close_ep(worker, ep);
  close(fd);
  close(lfd);
  free(peer);
  ucp_worker_release_address(worker, addr);
  ucp_rkey_buffer_release(rkey_buf);
  ucp_mem_unmap(ctx, memh);
  ucp_worker_destroy(worker);
  ucp_cleanup(ctx);
  if (failures) return 1;
  printf("OK\n");
  return 0;
}

static int client(const char* host, const char* port) {
  ucp_context_h ctx;
  ucp_worker_h worker;
  setup(&ctx, &worker);
  int fd = tcp_connect(host, port);
  uint64_t addr_len, rkey_len, base;
  void* peer = recv_blob(fd, &addr_len);
  void* rkey_buf = recv_blob(fd, &rkey_len);
  recv_all(fd, &base, sizeof base);
  ucp_address_t* addr;
  size_t my_len;
  check_status(ucp_worker_get_address(worker, &addr, &my_len), "ucp_worker_get_address");
  send_blob(fd, addr, my_len);
  ucp_ep_h ep = connect_ep(worker, peer);
  ucp_rkey_h rkey;
  check_status(ucp_ep_rkey_unpack(ep, rkey_buf, &rkey), "ucp_ep_rkey_unpack");

  uint64_t want[2];
  want[0] = run_sequence(worker, ep, 8, base + offsetof(struct Target, word64), rkey);
  want[1] = run_sequence(worker, ep, 4, base + offsetof(struct Target, word32), rkey);
  send_all(fd, want, sizeof want);
  char ack = 0;
  recv_all(fd, &ack, 1);
  if (ack != 'K') {
    printf("MISMATCH: the server found other values in its memory\n");
    ++failures;
  }
  ucp_rkey_destroy(rkey);
  close_ep(worker, ep);
  close(fd);
  free(peer);
  free(rkey_buf);
  ucp_worker_release_address(worker, addr);
  ucp_worker_destroy(worker);
  ucp_cleanup(ctx);
  if (failures) return 1;
  printf("OK\n");
  return 0;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc == 3 && strcmp(argv[1], "server") == 0) return server(atoi(argv[2]));
  if (argc == 4 && strcmp(argv[1], "client") == 0) return client(argv[2], argv[3]);
  fprintf(stderr, "usage: ucp_atomics server PORT | ucp_atomics client HOST PORT\n");
  return 2;
}
