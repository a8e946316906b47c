// softrdma_bench_scale: what many QPs cost in one process, through the public verbs API.
//
// Opens softrdma0 (or --device), allocates one PD, --cqs CQs and one MR, then:
//   1. creates and destroys one QP (the first QP starts softrdma's engine: timed apart);
//   2. creates --qps RC QPs (QP i on CQ i % cqs for sends and receives);
//   3. moves each RESET->INIT, then (unless --no-connect) pairs QP 2k with QP 2k+1 through
//      the ::ffff:127.0.0.1 GID and moves both INIT->RTR->RTS;
//   4. (connected) carries one 8-byte SEND on every pair and checks every completion and
//      payload, then measures the process's CPU time over --idle-window seconds of sleep;
//   5. destroys every QP, then the MR, CQs and PD, and closes the device.
// Memory per QP is the growth of the process's resident set (/proc/self/status VmRSS,
// RssAnon, RssShmem) and of the /dev/shm/softrdma-<SOFTRDMA_NAMESPACE>-* objects
// (allocated blocks and apparent size) between the baseline (after the warm-up QP) and all
// QPs created, divided by --qps; after destroying them (and malloc_trim) the resident set
// that stays above the baseline is reported as a total.
//
// Output: one JSON object per figure on stdout, e.g.
//   {"test":"scale","config":"wr128","qps":10000,"figure":"create_per_qp","unit":"us",
//    "value":3.2}
// and {"test":"scale","config":...,"error":"..."} (also on stderr) when a verb fails; the
// program then destroys what it created and exits 1. Exit 2: bad arguments.
#include <dirent.h>
#include <malloc.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string device = "softrdma0";
  std::string config;  // label; default derived from the queue sizes
  int qps = 10000;
  uint32_t send_wr = 128;
  uint32_t recv_wr = 128;
  uint32_t sge = 1;
  uint32_t inline_data = 0;
  int cqs = 4;
  int gid_index = -1;  // -1: look for ::ffff:127.0.0.1
  bool connect = true;
  double idle_window_s = 1.0;
};

Options g_opt;

double Us(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

void Figure(const char* figure, const char* unit, double value) {
  std::printf(
      "{\"test\":\"scale\",\"config\":\"%s\",\"qps\":%d,\"send_wr\":%u,\"recv_wr\":%u,"
      "\"figure\":\"%s\",\"unit\":\"%s\",\"value\":%.6g}\n",
      JsonEscape(g_opt.config).c_str(), g_opt.qps, g_opt.send_wr, g_opt.recv_wr, figure, unit,
      value);
  std::fflush(stdout);
}

// Everything the program creates, destroyed in reverse order by Release() on success and
// on failure alike.
struct Resources {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  std::vector<ibv_cq*> cqs;
  ibv_mr* mr = nullptr;
  std::vector<uint8_t> buf;
  std::vector<ibv_qp*> qps;

  // Returns the first error message, empty if everything was destroyed.
  std::string Release() {
    std::string err;
    auto note = [&err](const std::string& what, int rc) {
      if (rc && err.empty()) err = what + ": " + std::strerror(rc);
    };
    for (size_t i = qps.size(); i-- > 0;) {
      if (qps[i]) note("ibv_destroy_qp #" + std::to_string(i), ibv_destroy_qp(qps[i]));
    }
    qps.clear();
    if (mr) note("ibv_dereg_mr", ibv_dereg_mr(mr));
    mr = nullptr;
    for (ibv_cq* cq : cqs) note("ibv_destroy_cq", ibv_destroy_cq(cq));
    cqs.clear();
    if (pd) note("ibv_dealloc_pd", ibv_dealloc_pd(pd));
    pd = nullptr;
    if (ctx) note("ibv_close_device", ibv_close_device(ctx));
    ctx = nullptr;
    return err;
  }
};

Resources g_res;

// A verbs call failed: report it, destroy what exists, exit 1.
[[noreturn]] void Fail(const std::string& what, int err) {
  std::string msg = what + (err ? std::string(": ") + std::strerror(err) : std::string());
  std::fprintf(stderr, "softrdma_bench_scale: %s\n", msg.c_str());
  std::printf("{\"test\":\"scale\",\"config\":\"%s\",\"qps\":%d,\"error\":\"%s\"}\n",
              JsonEscape(g_opt.config).c_str(), g_opt.qps, JsonEscape(msg).c_str());
  std::fflush(stdout);
  std::string rel = g_res.Release();
  if (!rel.empty())
    std::fprintf(stderr, "softrdma_bench_scale: while cleaning up: %s\n", rel.c_str());
  std::exit(1);
}

// Verbs that return an errno value (0 on success); some providers return -1 and set errno.
void Check(int rc, const std::string& what) {
  if (rc) Fail(what, rc > 0 ? rc : errno);
}

struct Memory {
  double rss = 0, anon = 0, shmem = 0;  // bytes, /proc/self/status
  double shm_alloc = 0, shm_size = 0;   // bytes, /dev/shm/softrdma-<ns>-*
};

Memory Measure() {
  Memory m;
  std::ifstream f("/proc/self/status");
  std::string key;
  double kb;
  std::string line;
  while (std::getline(f, line)) {
    if (std::sscanf(line.c_str(), "VmRSS: %lf", &kb) == 1) m.rss = kb * 1024;
    if (std::sscanf(line.c_str(), "RssAnon: %lf", &kb) == 1) m.anon = kb * 1024;
    if (std::sscanf(line.c_str(), "RssShmem: %lf", &kb) == 1) m.shmem = kb * 1024;
  }
  const char* ns = std::getenv("SOFTRDMA_NAMESPACE");
  const std::string prefix =
      std::string("softrdma-") + (ns && *ns ? std::string(ns) + "-" : std::string());
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) {
      if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) != 0) continue;
      struct stat st {};
      if (stat(("/dev/shm/" + std::string(e->d_name)).c_str(), &st) != 0) continue;
      m.shm_alloc += static_cast<double>(st.st_blocks) * 512;
      m.shm_size += static_cast<double>(st.st_size);
    }
    closedir(d);
  }
  return m;
}

double CpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

int FindLoopbackGid(ibv_context* ctx) {
  ibv_port_attr pa{};
  Check(ibv_query_port(ctx, 1, &pa), "ibv_query_port");
  static const uint8_t lo[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
  for (int i = 0; i < pa.gid_tbl_len; ++i) {
    ibv_gid g{};
    Check(ibv_query_gid(ctx, 1, i, &g), "ibv_query_gid " + std::to_string(i));
    if (std::memcmp(g.raw, lo, sizeof lo) == 0) return i;
  }
  Fail("no ::ffff:127.0.0.1 GID on port 1 of " + g_opt.device, 0);
}

ibv_qp* CreateQp(int i) {
  ibv_qp_init_attr a{};
  a.send_cq = g_res.cqs[i < 0 ? 0 : static_cast<size_t>(i) % g_res.cqs.size()];
  a.recv_cq = a.send_cq;
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = g_opt.send_wr;
  a.cap.max_recv_wr = g_opt.recv_wr;
  a.cap.max_send_sge = g_opt.sge;
  a.cap.max_recv_sge = g_opt.sge;
  a.cap.max_inline_data = g_opt.inline_data;
  ibv_qp* qp = ibv_create_qp(g_res.pd, &a);
  if (!qp)
    Fail("ibv_create_qp " + (i < 0 ? std::string("of the first QP") : "#" + std::to_string(i)) +
             " (" + std::to_string(g_opt.qps) + " wanted, send_wr " +
             std::to_string(g_opt.send_wr) + ", recv_wr " + std::to_string(g_opt.recv_wr) + ")",
         errno);
  return qp;
}

void ToInit(ibv_qp* qp, int i) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  Check(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
        "ibv_modify_qp RESET->INIT #" + std::to_string(i));
}

void ToRtr(ibv_qp* qp, int i, uint32_t dest_qpn, const ibv_gid& gid) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = dest_qpn;
  a.rq_psn = 0;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = gid;
  a.ah_attr.grh.sgid_index = static_cast<uint8_t>(g_opt.gid_index);
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = 1;
  Check(ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
        "ibv_modify_qp INIT->RTR #" + std::to_string(i));
}

void ToRts(ibv_qp* qp, int i) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.sq_psn = 0;
  a.max_rd_atomic = 1;
  Check(ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                          IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC),
        "ibv_modify_qp RTR->RTS #" + std::to_string(i));
}

// One 8-byte SEND from QP 2k to QP 2k+1 for every pair; waits for every completion and
// checks the payloads. Returns microseconds for all of it.
double PairTraffic() {
  const int pairs = g_opt.qps / 2;
  uint8_t* base = g_res.buf.data();
  const size_t half = static_cast<size_t>(pairs) * 8;
  for (int k = 0; k < pairs; ++k) {
    uint64_t v = 0x5ca1e00000000000ull | static_cast<uint64_t>(k);
    std::memcpy(base + static_cast<size_t>(k) * 8, &v, 8);
    std::memset(base + half + static_cast<size_t>(k) * 8, 0, 8);
  }
  auto t0 = Clock::now();
  for (int k = 0; k < pairs; ++k) {
    ibv_sge rs{reinterpret_cast<uintptr_t>(base + half + static_cast<size_t>(k) * 8), 8,
               g_res.mr->lkey};
    ibv_recv_wr rwr{};
    rwr.wr_id = static_cast<uint64_t>(2 * k + 1);
    rwr.sg_list = &rs;
    rwr.num_sge = 1;
    ibv_recv_wr* bad_r = nullptr;
    Check(ibv_post_recv(g_res.qps[static_cast<size_t>(2 * k + 1)], &rwr, &bad_r),
          "ibv_post_recv on QP #" + std::to_string(2 * k + 1));
  }
  for (int k = 0; k < pairs; ++k) {
    ibv_sge ss{reinterpret_cast<uintptr_t>(base + static_cast<size_t>(k) * 8), 8, g_res.mr->lkey};
    ibv_send_wr swr{};
    swr.wr_id = static_cast<uint64_t>(2 * k);
    swr.sg_list = &ss;
    swr.num_sge = 1;
    swr.opcode = IBV_WR_SEND;
    swr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad_s = nullptr;
    Check(ibv_post_send(g_res.qps[static_cast<size_t>(2 * k)], &swr, &bad_s),
          "ibv_post_send on QP #" + std::to_string(2 * k));
  }
  const int want = 2 * pairs;
  int got = 0;
  auto deadline = Clock::now() + std::chrono::seconds(30);
  std::vector<ibv_wc> wc(64);
  while (got < want) {
    for (ibv_cq* cq : g_res.cqs) {
      int n = ibv_poll_cq(cq, static_cast<int>(wc.size()), wc.data());
      if (n < 0) Fail("ibv_poll_cq", EIO);
      for (int j = 0; j < n; ++j) {
        if (wc[static_cast<size_t>(j)].status != IBV_WC_SUCCESS)
          Fail("completion of QP #" + std::to_string(wc[static_cast<size_t>(j)].wr_id) + ": " +
                   ibv_wc_status_str(wc[static_cast<size_t>(j)].status),
               0);
      }
      got += n;
    }
    if (got < want && Clock::now() > deadline)
      Fail(
          "only " + std::to_string(got) + " of " + std::to_string(want) + " completions after 30 s",
          0);
  }
  auto t1 = Clock::now();
  for (int k = 0; k < pairs; ++k) {
    if (std::memcmp(base + static_cast<size_t>(k) * 8, base + half + static_cast<size_t>(k) * 8,
                    8) != 0)
      Fail("pair " + std::to_string(k) + ": received payload differs from the one sent", 0);
  }
  return Us(t0, t1);
}

// Mean over [from, to) of per-call times.
double MeanOf(const std::vector<double>& v, size_t from, size_t to) {
  if (to <= from) return 0;
  double s = 0;
  for (size_t i = from; i < to; ++i) s += v[i];
  return s / static_cast<double>(to - from);
}

// Mean, total, and the means of the first and last tenth (growth with the number of QPs).
void TimeFigures(const char* name, const std::vector<double>& us) {
  const size_t n = us.size(), tenth = std::max<size_t>(1, n / 10);
  double total = MeanOf(us, 0, n) * static_cast<double>(n);
  std::string f = std::string(name) + "_per_qp";
  Figure(f.c_str(), "us", MeanOf(us, 0, n));
  f = std::string(name) + "_total";
  Figure(f.c_str(), "ms", total / 1000.0);
  f = std::string(name) + "_first10pct_per_qp";
  Figure(f.c_str(), "us", MeanOf(us, 0, tenth));
  f = std::string(name) + "_last10pct_per_qp";
  Figure(f.c_str(), "us", MeanOf(us, n - tenth, n));
  f = std::string(name) + "_max";
  Figure(f.c_str(), "us", *std::max_element(us.begin(), us.end()));
}

void MemoryFigures(const char* when, const Memory& base, const Memory& now) {
  const double n = g_opt.qps;
  auto fig = [when](const char* what, double v) {
    std::string f = std::string(what) + "_per_qp_" + when;
    Figure(f.c_str(), "B", v);
  };
  fig("rss", (now.rss - base.rss) / n);
  fig("anon", (now.anon - base.anon) / n);
  fig("shmem", (now.shmem - base.shmem) / n);
  fig("shm_alloc", (now.shm_alloc - base.shm_alloc) / n);
  fig("shm_size", (now.shm_size - base.shm_size) / n);
}

[[noreturn]] void Usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--qps N] [--send-wr N] [--recv-wr N] [--sge N] [--inline N]\n"
               "          [--cqs N] [--gid INDEX] [--no-connect] [--idle-window SECONDS]\n"
               "          [--device NAME] [--config LABEL]\n",
               argv0);
  std::exit(2);
}

long ParseNum(const char* argv0, const std::string& v, long lo, long hi) {
  char* end = nullptr;
  errno = 0;
  long n = std::strtol(v.c_str(), &end, 10);
  if (errno || end == v.c_str() || *end || n < lo || n > hi) Usage(argv0);
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  Options& o = g_opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--no-connect") {
      o.connect = false;
      continue;
    }
    if (a == "-h" || a == "--help" || i + 1 >= argc) Usage(argv[0]);
    const std::string v = argv[++i];
    if (a == "--qps") {
      o.qps = static_cast<int>(ParseNum(argv[0], v, 2, 1 << 24));
    } else if (a == "--send-wr") {
      o.send_wr = static_cast<uint32_t>(ParseNum(argv[0], v, 1, 1 << 20));
    } else if (a == "--recv-wr") {
      o.recv_wr = static_cast<uint32_t>(ParseNum(argv[0], v, 1, 1 << 20));
    } else if (a == "--sge") {
      o.sge = static_cast<uint32_t>(ParseNum(argv[0], v, 1, 1024));
    } else if (a == "--inline") {
      o.inline_data = static_cast<uint32_t>(ParseNum(argv[0], v, 0, 1 << 16));
    } else if (a == "--cqs") {
      o.cqs = static_cast<int>(ParseNum(argv[0], v, 1, 4096));
    } else if (a == "--gid") {
      o.gid_index = static_cast<int>(ParseNum(argv[0], v, 0, 255));
    } else if (a == "--idle-window") {
      o.idle_window_s = std::strtod(v.c_str(), nullptr);
      if (!(o.idle_window_s >= 0 && o.idle_window_s <= 600)) Usage(argv[0]);
    } else if (a == "--device") {
      o.device = v;
    } else if (a == "--config") {
      o.config = v;
    } else {
      Usage(argv[0]);
    }
  }
  if (o.connect && o.qps % 2) o.qps += 1;  // pairs
  if (o.config.empty())
    o.config = "wr" + std::to_string(o.send_wr) +
               (o.recv_wr != o.send_wr ? "-" + std::to_string(o.recv_wr) : std::string());

  // Device, PD, CQs, MR: the baseline every QP is added to.
  int ndev = 0;
  ibv_device** list = ibv_get_device_list(&ndev);
  if (!list) Fail("ibv_get_device_list", errno);
  for (int i = 0; i < ndev && !g_res.ctx; ++i) {
    if (o.device == ibv_get_device_name(list[i])) {
      g_res.ctx = ibv_open_device(list[i]);
      if (!g_res.ctx) {
        int e = errno;
        ibv_free_device_list(list);
        Fail("ibv_open_device " + o.device, e);
      }
    }
  }
  ibv_free_device_list(list);
  if (!g_res.ctx) Fail("no device " + o.device + " (is LD_LIBRARY_PATH set to softrdma's?)", 0);
  if (o.connect && o.gid_index < 0) o.gid_index = FindLoopbackGid(g_res.ctx);
  ibv_gid gid{};
  if (o.connect)
    Check(ibv_query_gid(g_res.ctx, 1, o.gid_index, &gid),
          "ibv_query_gid " + std::to_string(o.gid_index));

  g_res.pd = ibv_alloc_pd(g_res.ctx);
  if (!g_res.pd) Fail("ibv_alloc_pd", errno);
  const int per_cq = (o.qps + o.cqs - 1) / o.cqs;
  for (int i = 0; i < o.cqs; ++i) {
    // Room for the one completion per QP of the traffic check, and some.
    ibv_cq* cq = ibv_create_cq(g_res.ctx, per_cq + 64, nullptr, nullptr, 0);
    if (!cq) Fail("ibv_create_cq (" + std::to_string(per_cq + 64) + " entries)", errno);
    g_res.cqs.push_back(cq);
  }
  g_res.buf.assign(static_cast<size_t>(o.qps) * 8 + 64, 0);
  g_res.mr = ibv_reg_mr(g_res.pd, g_res.buf.data(), g_res.buf.size(), IBV_ACCESS_LOCAL_WRITE);
  if (!g_res.mr) Fail("ibv_reg_mr", errno);

  // The first QP starts the engine (registry, ring, progress thread): timed apart.
  auto t0 = Clock::now();
  ibv_qp* first = CreateQp(-1);
  auto t1 = Clock::now();
  Check(ibv_destroy_qp(first), "ibv_destroy_qp (first QP)");
  Figure("first_qp_create", "us", Us(t0, t1));

  g_res.qps.reserve(static_cast<size_t>(o.qps));
  const Memory base = Measure();
  std::vector<double> us(static_cast<size_t>(o.qps));
  for (int i = 0; i < o.qps; ++i) {
    auto a = Clock::now();
    g_res.qps.push_back(CreateQp(i));
    us[static_cast<size_t>(i)] = Us(a, Clock::now());
  }
  const Memory created = Measure();
  TimeFigures("create", us);

  for (int i = 0; i < o.qps; ++i) {
    auto a = Clock::now();
    ToInit(g_res.qps[static_cast<size_t>(i)], i);
    us[static_cast<size_t>(i)] = Us(a, Clock::now());
  }
  TimeFigures("modify_init", us);

  if (o.connect) {
    for (int i = 0; i < o.qps; ++i) {
      const uint32_t dest = g_res.qps[static_cast<size_t>(i ^ 1)]->qp_num;
      auto a = Clock::now();
      ToRtr(g_res.qps[static_cast<size_t>(i)], i, dest, gid);
      us[static_cast<size_t>(i)] = Us(a, Clock::now());
    }
    TimeFigures("modify_rtr", us);
    for (int i = 0; i < o.qps; ++i) {
      auto a = Clock::now();
      ToRts(g_res.qps[static_cast<size_t>(i)], i);
      us[static_cast<size_t>(i)] = Us(a, Clock::now());
    }
    TimeFigures("modify_rts", us);
    Figure("pair_send_recv_per_pair", "us", PairTraffic() / (o.qps / 2));
    if (o.idle_window_s > 0) {
      double c0 = CpuSeconds();
      auto w0 = Clock::now();
      std::this_thread::sleep_for(std::chrono::duration<double>(o.idle_window_s));
      double wall = Us(w0, Clock::now()) / 1e6;
      Figure("idle_cpu_connected", "%", 100.0 * (CpuSeconds() - c0) / wall);
    }
  }
  const Memory ready = Measure();
  MemoryFigures("created", base, created);
  MemoryFigures(o.connect ? "rts" : "init", base, ready);

  for (int i = o.qps; i-- > 0;) {
    ibv_qp* qp = g_res.qps[static_cast<size_t>(i)];
    auto a = Clock::now();
    int rc = ibv_destroy_qp(qp);
    us[static_cast<size_t>(o.qps - 1 - i)] = Us(a, Clock::now());
    g_res.qps.pop_back();
    if (rc) Fail("ibv_destroy_qp #" + std::to_string(i), rc);
  }
  TimeFigures("destroy", us);
  // What the allocator keeps is not a leak: hand free memory back to the kernel first.
  malloc_trim(0);
  const Memory destroyed = Measure();
  Figure("rss_retained_after_destroy", "B", destroyed.rss - base.rss);

  std::string err = g_res.Release();
  if (!err.empty()) Fail(err, 0);
  return 0;
}
