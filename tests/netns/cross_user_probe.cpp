// softrdma_cross_user_probe: what a process of another user can do to the
// memory of a root process on the same host (netns.two_users).
//
//   cross_user_probe server TCP_PORT         (run as root: exposes one MR)
//   cross_user_probe client HOST TCP_PORT    (run as another uid: tries it)
//
// The server registers a 4 KiB buffer (remote read and write), connects
// four RC QPs to the client's and hands out their numbers, its GID, the
// buffer's address and rkey, and its pid over TCP. The client, running as
// another uid, checks that
//  1. every softrdma shared-memory object of another user (the server's
//     registry and process segment in /dev/shm) refuses to open (EACCES);
//  2. the server's memory refuses cross-memory attach (process_vm_readv:
//     EPERM) and /proc/<pid>/mem (EACCES);
//  3. an RDMA WRITE and an RDMA READ with an rkey other than the one handed
//     out end in IBV_WC_REM_ACCESS_ERR, and so does a WRITE with the right
//     rkey past the end of the buffer;
//  4. with the rkey handed out, a WRITE lands and a READ returns it.
// The server then checks its buffer: the 64 bytes written, nothing else
// changed. Exit status 0 only when every check passed; each failure is
// printed.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

constexpr int kQps = 4;
constexpr size_t kBufferBytes = 4096;
constexpr size_t kWritten = 64;
constexpr uint8_t kServerFill = 0x5a, kClientFill = 0xc3;

int failures = 0;

void Check(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAIL", what.c_str());
  if (!ok) ++failures;
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "cross_user_probe: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(2);
}

// What each side tells the other.
struct Endpoint {
  uint8_t gid[16];
  uint32_t qpn[kQps];
  uint32_t psn[kQps];
  uint64_t addr;
  uint32_t rkey;
  int32_t pid;
};

void SendAll(int fd, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t sent = send(fd, p, n, MSG_NOSIGNAL);
    if (sent <= 0) Die("send");
    p += sent;
    n -= size_t(sent);
  }
}

void ReceiveAll(int fd, void* data, size_t n) {
  auto* p = static_cast<uint8_t*>(data);
  while (n > 0) {
    const ssize_t got = recv(fd, p, n, 0);
    if (got <= 0) Die("recv");
    p += got;
    n -= size_t(got);
  }
}

struct Verbs {
  ibv_context* context = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_mr* mr = nullptr;
  ibv_qp* qps[kQps] = {};
  uint8_t* buffer = nullptr;
  ibv_gid gid{};

  void Open(int access) {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (!list || n == 0) Die("no RDMA device");
    context = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    if (!context) Die("ibv_open_device");
    pd = ibv_alloc_pd(context);
    cq = ibv_create_cq(context, 64, nullptr, nullptr, 0);
    buffer = static_cast<uint8_t*>(aligned_alloc(4096, kBufferBytes));
    if (!pd || !cq || !buffer) Die("pd/cq/buffer");
    mr = ibv_reg_mr(pd, buffer, kBufferBytes, access);
    if (!mr) Die("ibv_reg_mr");
    if (ibv_query_gid(context, 1, 0, &gid) != 0) Die("ibv_query_gid");
    for (ibv_qp*& qp : qps) {
      ibv_qp_init_attr init{};
      init.send_cq = init.recv_cq = cq;
      init.qp_type = IBV_QPT_RC;
      init.cap.max_send_wr = init.cap.max_recv_wr = 4;
      init.cap.max_send_sge = init.cap.max_recv_sge = 1;
      qp = ibv_create_qp(pd, &init);
      if (!qp) Die("ibv_create_qp");
      ibv_qp_attr a{};
      a.qp_state = IBV_QPS_INIT;
      a.port_num = 1;
      a.qp_access_flags = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
      if (ibv_modify_qp(qp, &a,
                        IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0)
        Die("INIT");
    }
  }

  Endpoint Local() const {
    Endpoint e{};
    std::memcpy(e.gid, gid.raw, 16);
    for (int i = 0; i < kQps; ++i) {
      e.qpn[i] = qps[i]->qp_num;
      e.psn[i] = uint32_t(100 + i);
    }
    e.addr = reinterpret_cast<uintptr_t>(buffer);
    e.rkey = mr->rkey;
    e.pid = int32_t(getpid());
    return e;
  }

  void Connect(const Endpoint& local, const Endpoint& remote) {
    for (int i = 0; i < kQps; ++i) {
      ibv_qp_attr a{};
      a.qp_state = IBV_QPS_RTR;
      a.path_mtu = IBV_MTU_1024;
      a.dest_qp_num = remote.qpn[i];
      a.rq_psn = remote.psn[i];
      a.max_dest_rd_atomic = 1;
      a.min_rnr_timer = 12;
      a.ah_attr.is_global = 1;
      std::memcpy(a.ah_attr.grh.dgid.raw, remote.gid, 16);
      a.ah_attr.grh.hop_limit = 1;
      a.ah_attr.grh.sgid_index = 0;
      a.ah_attr.port_num = 1;
      if (ibv_modify_qp(qps[i], &a,
                        IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                            IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0)
        Die("RTR");
      a = {};
      a.qp_state = IBV_QPS_RTS;
      a.timeout = 14;
      a.retry_cnt = 7;
      a.rnr_retry = 7;
      a.sq_psn = local.psn[i];
      a.max_rd_atomic = 1;
      if (ibv_modify_qp(qps[i], &a,
                        IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                            IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) != 0)
        Die("RTS");
    }
  }

  // One RDMA WRITE or READ of `length` bytes at `offset` of our buffer to
  // (addr, rkey); the completion's status (polled for up to 20 s).
  ibv_wc_status OneSided(int qp, ibv_wr_opcode opcode, size_t offset, uint32_t length,
                         uint64_t addr, uint32_t rkey) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(buffer + offset), length, mr->lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = uint64_t(qp);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = opcode;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = addr;
    wr.wr.rdma.rkey = rkey;
    if (ibv_post_send(qps[qp], &wr, &bad) != 0) Die("ibv_post_send");
    for (int spins = 0; spins < 20000; ++spins) {
      ibv_wc wc{};
      const int n = ibv_poll_cq(cq, 1, &wc);
      if (n < 0) Die("ibv_poll_cq");
      if (n == 1) return wc.status;
      usleep(1000);
    }
    std::fprintf(stderr, "cross_user_probe: no completion in 20 s\n");
    std::exit(2);
  }
};

// 1: another user's softrdma objects in /dev/shm do not open.
void CheckSharedMemoryIsClosed() {
  DIR* dir = opendir("/dev/shm");
  if (!dir) Die("opendir /dev/shm");
  int refused = 0, opened = 0;
  bool registry_seen = false;
  while (dirent* e = readdir(dir)) {
    const std::string name = e->d_name;
    if (name.rfind("softrdma-", 0) != 0) continue;
    const std::string path = "/dev/shm/" + name;
    struct stat st {};
    if (stat(path.c_str(), &st) != 0 || st.st_uid == getuid()) continue;
    for (int flags : {O_RDONLY, O_RDWR}) {
      const int fd = open(path.c_str(), flags | O_CLOEXEC);
      if (fd >= 0) {
        close(fd);
        ++opened;
        std::printf("FAIL: opened %s of uid %u\n", path.c_str(), unsigned(st.st_uid));
      } else if (errno == EACCES) {
        ++refused;
      }
    }
    if (name.find("-registry") != std::string::npos) registry_seen = true;
  }
  closedir(dir);
  Check(registry_seen, "the other user's registry is in /dev/shm");
  Check(opened == 0 && refused >= 4,
        "its shared memory refuses to open (" + std::to_string(refused) + " EACCES)");
}

// 2: no cross-memory attach nor /proc/<pid>/mem into the server.
void CheckProcessMemoryIsClosed(const Endpoint& server) {
  uint8_t byte = 0;
  iovec local{&byte, 1}, remote{reinterpret_cast<void*>(server.addr), 1};
  errno = 0;
  const ssize_t n = process_vm_readv(server.pid, &local, 1, &remote, 1, 0);
  Check(n < 0 && errno == EPERM, "process_vm_readv of the server: EPERM");
  const std::string mem = "/proc/" + std::to_string(server.pid) + "/mem";
  const int fd = open(mem.c_str(), O_RDWR | O_CLOEXEC);
  const int error = errno;
  if (fd >= 0) close(fd);
  Check(fd < 0 && (error == EACCES || error == EPERM), mem + " refuses to open");
}

int Server(const char* port) {
  Verbs v;
  v.Open(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  std::memset(v.buffer, kServerFill, kBufferBytes);
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(uint16_t(std::atoi(port)));
  if (bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      listen(listener, 1) != 0)
    Die("listen");
  const int fd = accept(listener, nullptr, nullptr);
  if (fd < 0) Die("accept");
  close(listener);
  const Endpoint local = v.Local();
  Endpoint remote;
  SendAll(fd, &local, sizeof local);
  ReceiveAll(fd, &remote, sizeof remote);
  v.Connect(local, remote);
  uint8_t ready = 1;
  SendAll(fd, &ready, 1);
  uint8_t done = 0;
  ReceiveAll(fd, &done, 1);
  bool intact = true;
  for (size_t i = 0; i < kBufferBytes; ++i)
    intact = intact && v.buffer[i] == (i < kWritten ? kClientFill : kServerFill);
  Check(intact, "server: the 64 bytes written with the rkey landed, nothing else changed");
  const uint8_t verdict = intact ? 1 : 0;
  SendAll(fd, &verdict, 1);
  close(fd);
  return failures == 0 ? 0 : 1;
}

int Client(const char* host, const char* port) {
  addrinfo hints{}, *found = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host, port, &hints, &found) != 0) Die("getaddrinfo");
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (connect(fd, found->ai_addr, found->ai_addrlen) != 0) Die("connect");
  freeaddrinfo(found);
  Verbs v;
  v.Open(IBV_ACCESS_LOCAL_WRITE);
  std::memset(v.buffer, kClientFill, kBufferBytes);
  const Endpoint local = v.Local();
  Endpoint server;
  ReceiveAll(fd, &server, sizeof server);
  SendAll(fd, &local, sizeof local);
  v.Connect(local, server);
  uint8_t ready = 0;
  ReceiveAll(fd, &ready, 1);

  CheckSharedMemoryIsClosed();
  CheckProcessMemoryIsClosed(server);
  const uint32_t wrong_rkey = server.rkey ^ 0x5a5a00u;
  ibv_wc_status s = v.OneSided(0, IBV_WR_RDMA_WRITE, 0, kWritten, server.addr, wrong_rkey);
  Check(s == IBV_WC_REM_ACCESS_ERR,
        std::string("RDMA WRITE with a wrong rkey: ") + ibv_wc_status_str(s));
  s = v.OneSided(1, IBV_WR_RDMA_READ, 0, kWritten, server.addr, wrong_rkey);
  Check(s == IBV_WC_REM_ACCESS_ERR,
        std::string("RDMA READ with a wrong rkey: ") + ibv_wc_status_str(s));
  s = v.OneSided(2, IBV_WR_RDMA_WRITE, 0, kWritten, server.addr + kBufferBytes - 8, server.rkey);
  Check(s == IBV_WC_REM_ACCESS_ERR,
        std::string("RDMA WRITE past the end of the MR: ") + ibv_wc_status_str(s));
  s = v.OneSided(3, IBV_WR_RDMA_WRITE, 0, kWritten, server.addr, server.rkey);
  Check(s == IBV_WC_SUCCESS,
        std::string("RDMA WRITE with the rkey handed out: ") + ibv_wc_status_str(s));
  std::memset(v.buffer, 0, kBufferBytes);
  s = v.OneSided(3, IBV_WR_RDMA_READ, 0, kBufferBytes, server.addr, server.rkey);
  bool read_back = s == IBV_WC_SUCCESS;
  for (size_t i = 0; i < kBufferBytes && read_back; ++i)
    read_back = v.buffer[i] == (i < kWritten ? kClientFill : kServerFill);
  Check(read_back, std::string("RDMA READ with the rkey handed out returns what is there: ") +
                       ibv_wc_status_str(s));

  const uint8_t done = 1;
  SendAll(fd, &done, 1);
  uint8_t verdict = 0;
  ReceiveAll(fd, &verdict, 1);
  Check(verdict == 1, "the server found its buffer as expected");
  close(fd);
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc == 3 && std::strcmp(argv[1], "server") == 0) return Server(argv[2]);
  if (argc == 4 && std::strcmp(argv[1], "client") == 0) return Client(argv[2], argv[3]);
  std::fprintf(stderr, "usage: %s server TCP_PORT | client HOST TCP_PORT\n", argv[0]);
  return 2;
}
