// softrdma_bench_limits: the machine's own limits, for the benchmark report.
//
//   memcpy_cold        single-thread memcpy bandwidth by size, out of cache: each copy
//                      reads and writes the next slot of two pools larger than the LLC
//   memcpy_hot         the same, always the same (cached) source and destination
//   cacheline_rtt      round trip of one cache line between two threads pinned to two
//                      cores (ping-pong on an atomic): the floor of any cross-core message
//   process_vm_writev  bandwidth of cross-memory attach into another process, by size,
//                      out of cache (the primitive softrdma's shm wire moves bulk data with)
//
// Output: one JSON object per line on stdout, e.g.
//   {"test":"memcpy_cold","size":1048576,"unit":"B/s","values":[...]}
// one value per repetition; errors as {"test":...,"error":"..."}. The report takes medians.
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::vector<size_t> sizes{8, 64, 512, 4096, 32768, 65536, 262144, 1048576, 4194304};
  int repeat = 5;
  double min_time_s = 0.2;  // per measurement
  long rtt_iters = 200000;
  size_t pool_bytes = 0;  // 0: derived from the LLC size
  int cpu_a = 0;
  int cpu_b = 1;
  std::vector<std::string> tests{"memcpy", "rtt", "cma"};
};

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

size_t LlcBytes() {
  long v = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (v > 0) return static_cast<size_t>(v);
  std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index3/size");
  std::string s;
  if (f >> s && !s.empty()) {
    size_t n = std::strtoull(s.c_str(), nullptr, 10);
    if (s.back() == 'K') n <<= 10;
    if (s.back() == 'M') n <<= 20;
    return n;
  }
  return 32u << 20;
}

void PrintValues(const char* test, size_t size, const char* unit, const std::vector<double>& v) {
  std::printf("{\"test\":\"%s\",\"size\":%zu,\"unit\":\"%s\",\"values\":[", test, size, unit);
  for (size_t i = 0; i < v.size(); ++i) std::printf("%s%.6g", i ? "," : "", v[i]);
  std::printf("]}\n");
  std::fflush(stdout);
}

void PrintError(const char* test, size_t size, const std::string& err) {
  std::printf("{\"test\":\"%s\",\"size\":%zu,\"error\":\"%s\"}\n", test, size, err.c_str());
  std::fflush(stdout);
}

char* MapPool(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  std::memset(p, 0x5a, bytes);  // fault every page in before timing
  return static_cast<char*>(p);
}

// Copies `size` bytes per operation with `op(offset)` until min_time has passed; returns B/s.
template <typename Op>
double TimeBandwidth(size_t size, size_t pool, double min_time, Op op) {
  const size_t slots = std::max<size_t>(1, pool / size);
  const size_t batch = std::max<size_t>(1, std::min<size_t>(4096, (64u << 20) / size));
  size_t slot = 0;
  uint64_t ops = 0;
  // Warm-up pass (page tables, TLB, code).
  for (size_t i = 0; i < std::min(slots, batch); ++i) op((i % slots) * size);
  const auto t0 = Clock::now();
  double elapsed = 0;
  do {
    for (size_t i = 0; i < batch; ++i) {
      op(slot * size);
      if (++slot == slots) slot = 0;
    }
    ops += batch;
    elapsed = Seconds(t0, Clock::now());
  } while (elapsed < min_time);
  return static_cast<double>(ops) * static_cast<double>(size) / elapsed;
}

void RunMemcpy(const Options& o, size_t pool) {
  char* src = MapPool(pool);
  char* dst = MapPool(pool);
  if (!src || !dst) {
    PrintError("memcpy_cold", 0, std::string("mmap: ") + std::strerror(errno));
    return;
  }
  for (size_t size : o.sizes) {
    if (size > pool) continue;
    std::vector<double> cold;
    std::vector<double> hot;
    for (int r = 0; r < o.repeat; ++r) {
      cold.push_back(TimeBandwidth(size, pool, o.min_time_s, [&](size_t off) {
        std::memcpy(dst + off, src + off, size);
        asm volatile("" ::: "memory");
      }));
      hot.push_back(TimeBandwidth(size, size, o.min_time_s, [&](size_t off) {
        std::memcpy(dst + off, src + off, size);
        asm volatile("" ::: "memory");
      }));
    }
    PrintValues("memcpy_cold", size, "B/s", cold);
    PrintValues("memcpy_hot", size, "B/s", hot);
  }
  munmap(src, pool);
  munmap(dst, pool);
}

bool Pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

void RunRtt(const Options& o) {
  struct alignas(64) Line {
    std::atomic<uint64_t> v{0};
  };
  std::vector<double> ns;
  std::string err;
  for (int r = 0; r < o.repeat && err.empty(); ++r) {
    Line line;
    const uint64_t iters = static_cast<uint64_t>(o.rtt_iters);
    std::atomic<bool> pinned_b{true};
    std::thread b([&] {
      pinned_b = Pin(o.cpu_b);
      for (uint64_t i = 0; i < iters; ++i) {
        const uint64_t want = 2 * i + 1;
        while (line.v.load(std::memory_order_acquire) != want) {
        }
        line.v.store(want + 1, std::memory_order_release);
      }
    });
    if (!Pin(o.cpu_a)) err = "cannot pin to cpu " + std::to_string(o.cpu_a);
    // Warm-up is the first 1/10 of the iterations; time the rest.
    const uint64_t warm = iters / 10;
    Clock::time_point t0 = Clock::now();
    for (uint64_t i = 0; i < iters; ++i) {
      if (i == warm) t0 = Clock::now();
      line.v.store(2 * i + 1, std::memory_order_release);
      while (line.v.load(std::memory_order_acquire) != 2 * i + 2) {
      }
    }
    const auto t1 = Clock::now();
    b.join();
    if (!pinned_b) err = "cannot pin to cpu " + std::to_string(o.cpu_b);
    ns.push_back(Seconds(t0, t1) * 1e9 / static_cast<double>(iters - warm));
  }
  if (!err.empty()) {
    PrintError("cacheline_rtt", 64, err);
    return;
  }
  PrintValues("cacheline_rtt", 64, "ns", ns);
}

void RunCma(const Options& o, size_t pool) {
  int to_parent[2];
  int to_child[2];
  if (pipe(to_parent) != 0 || pipe(to_child) != 0) {
    PrintError("process_vm_writev", 0, std::string("pipe: ") + std::strerror(errno));
    return;
  }
  std::fflush(stdout);
  const pid_t child = fork();
  if (child < 0) {
    PrintError("process_vm_writev", 0, std::string("fork: ") + std::strerror(errno));
    return;
  }
  if (child == 0) {
    // The target: maps its pool, tells the parent where, waits until told to go.
    close(to_parent[0]);
    close(to_child[1]);
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    char* buf = MapPool(pool);
    uintptr_t addr = reinterpret_cast<uintptr_t>(buf);
    if (write(to_parent[1], &addr, sizeof(addr)) != sizeof(addr)) _exit(1);
    char c;
    while (read(to_child[0], &c, 1) > 0) {
    }
    _exit(0);
  }
  close(to_parent[1]);
  close(to_child[0]);
  uintptr_t remote = 0;
  char* src = MapPool(pool);
  if (read(to_parent[0], &remote, sizeof(remote)) != sizeof(remote) || remote == 0 || !src) {
    PrintError("process_vm_writev", 0, "the target process failed to map its buffer");
  } else {
    for (size_t size : o.sizes) {
      if (size > pool) continue;
      std::vector<double> bw;
      int error = 0;
      for (int r = 0; r < o.repeat && !error; ++r) {
        bw.push_back(TimeBandwidth(size, pool, o.min_time_s, [&](size_t off) {
          size_t done = 0;
          while (done < size && !error) {
            iovec local{src + off + done, size - done};
            iovec rem{reinterpret_cast<void*>(remote + off + done), size - done};
            ssize_t n = process_vm_writev(child, &local, 1, &rem, 1, 0);
            if (n <= 0) {
              error = n < 0 ? errno : EIO;
              return;
            }
            done += static_cast<size_t>(n);
          }
        }));
      }
      if (error) {
        PrintError("process_vm_writev", size,
                   std::string("process_vm_writev: ") + std::strerror(error));
        break;
      }
      PrintValues("process_vm_writev", size, "B/s", bw);
    }
  }
  close(to_child[1]);
  close(to_parent[0]);
  int status = 0;
  waitpid(child, &status, 0);
  if (src) munmap(src, pool);
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

[[noreturn]] void Usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--sizes N,N,...] [--repeat N] [--min-time SECONDS]\n"
               "          [--rtt-iters N] [--pool-bytes N] [--cpus A,B]\n"
               "          [--tests memcpy,rtt,cma]\n",
               argv0);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) Usage(argv[0]);
    const std::string v = argv[++i];
    if (a == "--sizes") {
      o.sizes.clear();
      for (const auto& s : Split(v)) o.sizes.push_back(std::strtoull(s.c_str(), nullptr, 0));
    } else if (a == "--repeat") {
      o.repeat = std::max(1, std::atoi(v.c_str()));
    } else if (a == "--min-time") {
      o.min_time_s = std::atof(v.c_str());
    } else if (a == "--rtt-iters") {
      o.rtt_iters = std::max(10L, std::atol(v.c_str()));
    } else if (a == "--pool-bytes") {
      o.pool_bytes = std::strtoull(v.c_str(), nullptr, 0);
    } else if (a == "--cpus") {
      const auto c = Split(v);
      if (c.size() != 2) Usage(argv[0]);
      o.cpu_a = std::atoi(c[0].c_str());
      o.cpu_b = std::atoi(c[1].c_str());
    } else if (a == "--tests") {
      o.tests = Split(v);
    } else {
      Usage(argv[0]);
    }
  }
  const size_t llc = LlcBytes();
  size_t pool = o.pool_bytes;
  if (pool == 0) {
    // Twice the LLC, at least 64 MiB, at most 512 MiB per pool (some hypervisors report the
    // sum of all L3 slices; 512 MiB is out of any single core's reach either way).
    pool = std::clamp<size_t>(2 * llc, 64u << 20, 512u << 20);
  }
  const size_t max_size = *std::max_element(o.sizes.begin(), o.sizes.end());
  pool = std::max(pool, max_size);
  std::printf(
      "{\"test\":\"info\",\"llc_bytes\":%zu,\"pool_bytes\":%zu,\"repeat\":%d,"
      "\"min_time_s\":%g,\"cpus\":[%d,%d]}\n",
      llc, pool, o.repeat, o.min_time_s, o.cpu_a, o.cpu_b);
  for (const auto& t : o.tests) {
    if (t == "memcpy") {
      RunMemcpy(o, pool);
    } else if (t == "rtt") {
      RunRtt(o);
    } else if (t == "cma") {
      RunCma(o, pool);
    } else {
      PrintError(t.c_str(), 0, "unknown test");
    }
  }
  return 0;
}
