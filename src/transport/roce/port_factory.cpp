#include "transport/roce/port_factory.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <unordered_map>
#include <utility>

#include "host/registry.h"
#include "transport/engine.h"
#include "transport/roce/roce_qp.h"
#include "util/config.h"
#include "util/log.h"
#include "wire/roce/fault_port.h"
#include "wire/roce/forwarding_port.h"
#include "wire/roce/udp_port.h"

namespace softrdma::transport::roce {
namespace {

using softrdma::roce::ForwardingPort;
using softrdma::roce::PacketPort;
using softrdma::roce::UdpPort;
using softrdma::roce::UdpPortOptions;

// The owner of a QPN when it is another live process of this registry,
// cached per QPN: the recorded owner is checked on every datagram (a load,
// no system call); the liveness check (a system call and a read of /proc)
// only when that owner changed. A cached owner that died since makes the
// forward fail (its socket is gone with it), which costs a dropped datagram.
class ForeignOwners {
 public:
  explicit ForeignOwners(Engine* engine) : engine_(engine) {}
  uint32_t operator()(uint32_t qpn) {
    ProcRef ref;
    Registry& registry = engine_->registry();
    if (!registry.QpnOwner(qpn, &ref) || ref == engine_->me()) return 0;
    auto it = cache_.find(qpn);
    if (it != cache_.end() && it->second.first == ref) return it->second.second;
    if (cache_.size() >= 4096) cache_.clear();
    const pid_t pid = registry.LivePid(ref);
    cache_[qpn] = {ref, uint32_t(pid > 0 ? pid : 0)};
    return uint32_t(pid > 0 ? pid : 0);
  }

 private:
  Engine* engine_;
  std::unordered_map<uint32_t, std::pair<ProcRef, uint32_t>> cache_;
};

}  // namespace

std::unique_ptr<PacketPort> OpenPacketPort(Status* err) {
  UdpPortOptions options;
  if (const char* addresses = getenv("SOFTRDMA_ROCE_ADDRS"); addresses && *addresses) {
    if (Status s = softrdma::roce::ParseAddressList(addresses, &options.addresses); !s.ok()) {
      *err = Status::Error(s.code(), "SOFTRDMA_ROCE_ADDRS: " + s.message());
      return nullptr;
    }
  }
  std::unique_ptr<UdpPort> udp;
  if (Status s = UdpPort::Open(options, &udp); !s.ok()) {
    *err = s;
    return nullptr;
  }
  std::unique_ptr<PacketPort> port = std::move(udp);
  // Faults below the demultiplexing: they act on what the network carries.
  if (Status s = softrdma::roce::WrapWithFaultsFromEnv(&port); !s.ok()) {
    *err = s;
    return nullptr;
  }
  Engine* engine = Engine::Current();
  if (!engine) {
    *err = Status::Error(ENODEV, "no engine");
    return nullptr;
  }
  // "/softrdma-<ns>-<uid>" -> "softrdma-<ns>-<uid>-roce-<pid>" (abstract).
  std::string prefix = GetConfig().ShmPrefix();
  if (!prefix.empty() && prefix[0] == '/') prefix.erase(0, 1);
  prefix += "-roce-";
  // Registries' gateways, one name per QPN range (host/qpn_range.h) for
  // every user of the network namespace: "softrdma-roce-gw-<slot>".
  ForwardingPort::Gateway gateway;
  gateway.prefix = "softrdma-roce-gw-";
  gateway.own_slot = engine->registry().qpn_slot();
  gateway.slot_of = [](uint32_t qpn) { return QpnSlotOf(qpn); };
  std::unique_ptr<ForwardingPort> forwarding;
  if (Status s = ForwardingPort::Open(std::move(port), prefix, uint32_t(getpid()),
                                      ForeignOwners(engine), &forwarding, &gateway);
      !s.ok()) {
    *err = s;
    return nullptr;
  }
  return forwarding;
}

void LogCounters(PacketPort* port) {
  const Counters& c = GetCounters();
  auto n = [](const std::atomic<uint64_t>& v) {
    return static_cast<unsigned long long>(v.load(std::memory_order_relaxed));
  };
  SOFTRDMA_LOG(kInfo,
               "RoCE: tx %llu rx %llu retransmits %llu duplicates %llu seq NAKs %llu; dropped: "
               "no QP %llu wrong QP %llu PSN %llu ICRC %llu; port refused %llu",
               n(c.tx_packets), n(c.rx_packets), n(c.retransmits), n(c.duplicates),
               n(c.seq_naks_sent), n(c.drop_no_qp), n(c.drop_wrong_qp), n(c.drop_psn_window),
               n(c.drop_bad_icrc), n(c.send_refused));
  if (const auto* forwarding = dynamic_cast<const ForwardingPort*>(port)) {
    const ForwardingPort::Counters f = forwarding->counters();
    SOFTRDMA_LOG(kInfo,
                 "RoCE forwarding: to processes %llu (failed %llu), received %llu, refused %llu; "
                 "to gateways %llu (failed %llu), via our gateway %llu (refused %llu); Unix "
                 "datagrams %llu (failed %llu); gateway held: %s",
                 static_cast<unsigned long long>(f.forwarded),
                 static_cast<unsigned long long>(f.forward_failed),
                 static_cast<unsigned long long>(f.received_forwarded),
                 static_cast<unsigned long long>(f.refused),
                 static_cast<unsigned long long>(f.to_gateway),
                 static_cast<unsigned long long>(f.to_gateway_failed),
                 static_cast<unsigned long long>(f.via_gateway),
                 static_cast<unsigned long long>(f.gateway_refused),
                 static_cast<unsigned long long>(f.batches_sent),
                 static_cast<unsigned long long>(f.batches_failed),
                 forwarding->holds_gateway() ? "yes" : "no");
  }
}

}  // namespace softrdma::transport::roce
