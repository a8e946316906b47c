// Fuzz target of the RoCE transport's receive path (src/transport/roce and
// the GSI forwarder behind QP1): packets built from the input are delivered
// over an in-process packet port (tests/unit/fake_packet_port.h) to QPs of
// this process in RTS, as a network would deliver them:
//   - an RC requester with a READ, an atomic, a two-packet SEND and a WRITE
//     outstanding (what it sends is dropped, so they stay outstanding);
//   - an RC responder with posted receives and a registered MR;
//   - a UC QP with posted receives; a UD QP with posted receives;
//   - QP1 (CM MADs, handed to the GSI forwarder; the process's own
//     SOFTRDMA_NAMESPACE keeps its CM socket names away from other programs).
// The input is a seed of roce_corpus/ (an IP datagram, or a bare UDP payload)
// mutated. A packet that parses is re-addressed to the QP its service
// belongs to, at the PSN that QP expects (or one behind: a duplicate, or
// 2^23 ahead: out of the window), with a valid ICRC, and, as the input's
// bits choose, the MR's rkey and addresses, the UD Q_Key, sent twice, to a
// QPN nobody has, with an unknown opcode, cut short, or with a bad ICRC.
// Whatever arrives: no crash, no assertion, every packet is taken by the
// receive path (rx_packets), and what must be dropped (bad ICRC, unknown
// opcode, no such QP, cut short) raises a drop counter. The QPs are built
// again whenever anything completed or a QP left RTS.
//
// Built with libFuzzer when the compiler is clang, else with the corpus
// driver fuzz_driver.cpp: see CMakeLists.txt here. The transport is linked
// from softrdma_core; for a search guided by its coverage and checked by
// AddressSanitizer, build the whole tree instrumented:
//   (clang's -Wunused-private-field finds ring.h's padding fields: not an error here)
//   F="-fsanitize=fuzzer-no-link,address,undefined -Wno-error=unused-private-field"
//   CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo
//     "-DCMAKE_CXX_FLAGS=$F" "-DCMAKE_C_FLAGS=$F"
//     "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined"
//   cmake --build build-fuzz -j2 --target roce_transport_fuzz
//   mkdir -p /tmp/transport-corpus && cp tests/fuzz/roce_corpus/* /tmp/transport-corpus/
//   build-fuzz/bin/roce_transport_fuzz -max_total_time=60 /tmp/transport-corpus
#include <endian.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "core/qp.h"
#include "core/verbs.h"
#include "engine_test_support.h"
#include "fake_packet_port.h"
#include "transport/engine.h"
#include "transport/roce/roce_qp.h"
#include "util/clock.h"
#include "wire/roce/icrc.h"
#include "wire/roce/ip_datagram.h"
#include "wire/roce/opcode_table.h"
#include "wire/roce/packet.h"

namespace {

using namespace softrdma;
using namespace softrdma::verbs;
namespace sr = softrdma::roce;
namespace tr = softrdma::transport::roce;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "roce_transport_fuzz: %s\n", what);
  std::abort();
}

constexpr uint32_t kStartPsn = 0xFFFFFE;  // PSNs wrap within the first packets
constexpr uint32_t kQkey = 0x11111111;
constexpr size_t kMemoryBytes = 65536;
constexpr uint32_t kNobodysQpn = 0xABCDE;
constexpr int kRecvs = 32;

uint64_t DropTotal() {
  const tr::Counters& c = tr::GetCounters();
  return c.drop_short + c.drop_bad_icrc + c.drop_unknown_opcode + c.drop_bad_header + c.drop_no_qp +
         c.drop_wrong_qp + c.drop_psn_window + c.drop_unsolicited_response;
}

// The engine, its fake port and the QPs under test, built once per process
// (the QPs again whenever the input made them move on).
class World {
 public:
  World() {
    testing::UseOwnNamespace();
    std::atexit(testing::RemoveOwnRegistry);
    engine_ = Engine::Get(nullptr);
    if (!engine_) Fail("no engine");
    auto port = std::make_unique<testing::FakePacketPort>();
    port_ = port.get();
    // What the QPs send is lost: requests stay outstanding, answers vanish.
    port_->SetDropIf([](const std::vector<uint8_t>&, uint64_t) { return true; });
    engine_->SetPacketPortForTesting(std::move(port));
    ctx_ = testing::OpenFirstDevice();
    if (!ctx_) Fail("no device, or it does not open");
    const int gid_index = testing::LoopbackGid(ctx_);
    if (gid_index < 0) Fail("no loopback GID");
    gid_index_ = static_cast<uint8_t>(gid_index);
    QueryGid(ctx_, 1, gid_index_, &gid_);
    memcpy(addr_.s6_addr, gid_.raw, 16);
    memcpy(net_.src_gid.data(), gid_.raw, 16);
    memcpy(net_.dst_gid.data(), gid_.raw, 16);
    net_.ip_version = 4;
    net_.udp_src_port = sr::kRoceUdpPort;
    pd_ = AllocPd(ctx_);
    memory_.assign(kMemoryBytes, 0);
    mr_ = RegMr(pd_, memory_.data(), memory_.size(), reinterpret_cast<uintptr_t>(memory_.data()),
                IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                    IBV_ACCESS_REMOTE_ATOMIC);
    cq_ = CreateCq(ctx_, 4096, nullptr, nullptr, 0);
    if (!pd_ || !mr_ || !cq_) Fail("cannot set up PD, MR, CQ");
    Build();
  }

  // Delivers `bytes` (a UDP payload) and waits until the receive path took
  // it; `must_drop`: it must raise a drop counter.
  void Deliver(const std::vector<uint8_t>& bytes, bool must_drop, const char* what = "") {
    const tr::Counters& c = tr::GetCounters();
    const uint64_t rx = c.rx_packets, drops = DropTotal(), done = port_->delivered();
    port_->Inject(bytes, addr_, addr_);
    // Handled by this thread's poll or by the progress thread's.
    const uint64_t give_up = NowNs() + 10'000'000'000ull;
    while (port_->delivered() == done) {
      engine_->PollRoce();
      if (NowNs() > give_up) Fail("a packet was never received");
    }
    if (c.rx_packets == rx) Fail("a packet did not reach the receive path");
    if (must_drop && DropTotal() == drops) {
      std::fprintf(stderr, "%s packet of %zu bytes:", what, bytes.size());
      for (size_t i = 0; i < bytes.size() && i < 48; ++i) std::fprintf(stderr, " %02x", bytes[i]);
      std::fprintf(stderr, "\n%s\n", tr::FormatCounters().c_str());
      Fail("a packet that must be dropped was not counted");
    }
  }

  // After an input: the QPs built again if anything completed or left RTS.
  void Settle() {
    ibv_wc wc[16];
    bool moved = PollCq(cq_, 16, wc) > 0;
    for (ibv_qp* qp : {requester_, responder_, uc_, ud_}) moved |= State(qp) != IBV_QPS_RTS;
    if (moved) {
      Destroy();
      while (PollCq(cq_, 16, wc) > 0) {
      }
      Build();
    }
  }

  enum class Target { kRequester, kResponder, kUc, kUd, kGsi };
  uint32_t Qpn(Target t) const {
    switch (t) {
      case Target::kRequester:
        return requester_->qp_num;
      case Target::kResponder:
        return responder_->qp_num;
      case Target::kUc:
        return uc_->qp_num;
      case Target::kUd:
        return ud_->qp_num;
      case Target::kGsi:
        return 1;
    }
    return 0;
  }
  // The PSN the target expects next: the requester's oldest outstanding
  // one, the expected PSN of the others.
  uint32_t ExpectedPsn(Target t) const {
    if (t == Target::kUd || t == Target::kGsi) return 0;
    Qp* qp = Qp::From(t == Target::kRequester ? requester_ : t == Target::kUc ? uc_ : responder_);
    std::lock_guard<SpinLock> lock(qp->lock);
    if (t == Target::kRequester) return qp->roce ? qp->roce->comp_psn : kStartPsn;
    return qp->epsn;
  }
  uint64_t base() const { return reinterpret_cast<uintptr_t>(memory_.data()); }
  uint32_t rkey() const { return mr_->rkey; }
  const sr::NetworkHeaders& net() const { return net_; }

 private:
  static ibv_qp_state State(ibv_qp* qp) {
    Qp* q = Qp::From(qp);
    std::lock_guard<SpinLock> lock(q->lock);
    return static_cast<ibv_qp_state>(q->state);
  }
  ibv_qp* Make(ibv_qp_type type) {
    ibv_qp_init_attr a{};
    a.send_cq = a.recv_cq = cq_;
    a.qp_type = type;
    a.cap = {64, 64, 2, 2, 64};
    ibv_qp* qp = CreateQp(pd_, &a);
    if (!qp) Fail("cannot create a QP");
    return qp;
  }
  void Connect(ibv_qp* qp, uint32_t dest) {
    const bool rc = qp->qp_type == IBV_QPT_RC, ud = qp->qp_type == IBV_QPT_UD;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qkey = kQkey;
    a.qp_access_flags =
        ud ? 0
           : IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | (rc ? IBV_ACCESS_REMOTE_ATOMIC : 0);
    int mask =
        IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS);
    if (ModifyQp(qp, &a, mask)) Fail("INIT");
    a = {};
    a.qp_state = IBV_QPS_RTR;
    mask = IBV_QP_STATE;
    if (!ud) {
      a.path_mtu = IBV_MTU_1024;
      a.dest_qp_num = dest;
      a.rq_psn = kStartPsn;
      a.max_dest_rd_atomic = 4;
      a.min_rnr_timer = 1;
      a.ah_attr.port_num = 1;
      a.ah_attr.is_global = 1;
      a.ah_attr.grh.hop_limit = 1;
      a.ah_attr.grh.sgid_index = gid_index_;
      a.ah_attr.grh.dgid = gid_;
      mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
      if (rc) mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    }
    if (ModifyQp(qp, &a, mask)) Fail("RTR");
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = kStartPsn;
    a.timeout = 31;  // hours: nothing outstanding times out during a run
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 4;
    mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
    if (rc) mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
    if (ModifyQp(qp, &a, mask)) Fail("RTS");
  }
  void PostRecvs(ibv_qp* qp, size_t at) {
    for (int i = 0; i < kRecvs; ++i) {
      ibv_sge sge{base() + at, 1024 + 64, mr_->lkey};  // a UD receive's GRH area too
      ibv_recv_wr wr{};
      wr.sg_list = &sge;
      wr.num_sge = 1;
      ibv_recv_wr* bad = nullptr;
      if (PostRecv(qp, &wr, &bad)) Fail("cannot post a receive");
    }
  }
  void Post(ibv_wr_opcode op, size_t local, uint32_t len) {
    ibv_sge sge{base() + local, len, mr_->lkey};
    ibv_send_wr wr{};
    wr.opcode = op;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    if (op == IBV_WR_ATOMIC_FETCH_AND_ADD)
      wr.wr.atomic = {base() + 8, 1, 0, mr_->rkey};
    else
      wr.wr.rdma = {base() + 4096, mr_->rkey};
    ibv_send_wr* bad = nullptr;
    if (PostSend(requester_, &wr, &bad)) Fail("cannot post to the requester");
  }
  void Build() {
    requester_ = Make(IBV_QPT_RC);
    responder_ = Make(IBV_QPT_RC);
    uc_ = Make(IBV_QPT_UC);
    ud_ = Make(IBV_QPT_UD);
    Connect(requester_, responder_->qp_num);
    Connect(responder_, requester_->qp_num);
    Connect(uc_, uc_->qp_num);
    Connect(ud_, 0);
    if (!Qp::From(requester_)->roce) Fail("the QPs are not on the RoCE wire");
    PostRecvs(responder_, 16384);
    PostRecvs(uc_, 24576);
    PostRecvs(ud_, 32768);
    Post(IBV_WR_RDMA_READ, 40960, 256);
    Post(IBV_WR_ATOMIC_FETCH_AND_ADD, 41216, 8);
    Post(IBV_WR_SEND, 42000, 2000);  // two packets at MTU 1024
    Post(IBV_WR_RDMA_WRITE, 44096, 100);
  }
  void Destroy() {
    for (ibv_qp** qp : {&requester_, &responder_, &uc_, &ud_}) {
      if (DestroyQp(*qp)) Fail("cannot destroy a QP");
      *qp = nullptr;
    }
  }

  Engine* engine_ = nullptr;
  testing::FakePacketPort* port_ = nullptr;
  ibv_context* ctx_ = nullptr;
  uint8_t gid_index_ = 0;
  ibv_gid gid_{};
  in6_addr addr_{};
  sr::NetworkHeaders net_;
  ibv_pd* pd_ = nullptr;
  std::vector<uint8_t> memory_;
  ibv_mr* mr_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp *requester_ = nullptr, *responder_ = nullptr, *uc_ = nullptr, *ud_ = nullptr;
};

// Input bits, consumed one choice at a time (from a hash of the input, so
// that any mutation changes the choices too).
struct Choices {
  uint64_t bits;
  uint64_t Take(uint64_t n) {
    const uint64_t v = bits % n;
    bits = bits / n ^ (bits * 0x9E3779B97F4A7C15ull);
    return v;
  }
};

uint64_t Hash(std::span<const uint8_t> data) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (uint8_t b : data) h = (h ^ b) * 1099511628211ull;
  return h;
}

void Reseal(const sr::NetworkHeaders& net, std::vector<uint8_t>& packet) {
  if (packet.size() < sr::kBthSize + sr::kIcrcSize) return;
  const std::span<const uint8_t> transport(packet.data(), packet.size() - sr::kIcrcSize);
  sr::StoreIcrc(sr::ComputeIcrc(net, transport),
                std::span<uint8_t, sr::kIcrcSize>(packet.data() + transport.size(), sr::kIcrcSize));
}

// Whether `changed` differs from `packet` only by an ICRC that is the
// packet's under another IPv4 identification (icrc.h).
bool IsAnotherIpv4IdsIcrc(const sr::NetworkHeaders& net, const std::vector<uint8_t>& packet,
                          const std::vector<uint8_t>& changed) {
  if (net.ip_version != 4 || packet.size() < sr::kIcrcSize) return false;
  const size_t at = packet.size() - sr::kIcrcSize;
  const uint32_t delta =
      sr::LoadIcrc(std::span<const uint8_t, sr::kIcrcSize>(packet.data() + at, sr::kIcrcSize)) ^
      sr::LoadIcrc(std::span<const uint8_t, sr::kIcrcSize>(changed.data() + at, sr::kIcrcSize));
  return sr::FindIpv4IdForIcrcDelta(delta, at) > 0;
}

World::Target TargetOf(const sr::PacketView& view, Choices& choose) {
  switch (view.info->service) {
    case sr::TransportService::kRc:
      return view.info->is_request ? World::Target::kResponder : World::Target::kRequester;
    case sr::TransportService::kUc:
      return World::Target::kUc;
    default:  // UD, and RD/CNP (dropped whatever their QP)
      return choose.Take(2) ? World::Target::kGsi : World::Target::kUd;
  }
}

// The packet re-addressed to `target` at `psn`, keys fixed as chosen, with a
// valid ICRC; empty if the codec refuses it.
std::vector<uint8_t> Readdress(World& world, const sr::PacketView& view, World::Target target,
                               uint32_t psn, Choices& choose) {
  sr::TransportHeaders h = view.headers;
  h.bth.dest_qp = world.Qpn(target);
  h.bth.psn = psn & 0xFFFFFF;
  if (choose.Take(4) != 0) {  // mostly keys that open the MR, to reach the data path
    const uint64_t span = kMemoryBytes / 2;
    h.reth.rkey = world.rkey();
    h.reth.va = world.base() + h.reth.va % span;
    h.reth.dma_length %= static_cast<uint32_t>(span);
    h.atomic_eth.rkey = world.rkey();
    h.atomic_eth.va = world.base() + (h.atomic_eth.va % (span / 8)) * 8;
    h.deth.qkey = kQkey;
  }
  std::vector<uint8_t> out(sr::PacketLength(*view.info, view.payload.size()));
  size_t written = 0;
  if (!sr::EncodePacket(world.net(), h, view.payload, out, &written).ok()) return {};
  out.resize(written);
  return out;
}

void DeliverParsed(World& world, const sr::PacketView& view, Choices& choose) {
  const World::Target target = TargetOf(view, choose);
  const uint32_t expected = world.ExpectedPsn(target);
  // The PSN: the expected one (or a little after: the requester has 5
  // outstanding), one behind (a duplicate) or 2^23 ahead (out of the window).
  static constexpr int32_t kOffsets[] = {0, 0, 1, 2, 3, -1, 0x800000};
  const int32_t offset = kOffsets[choose.Take(std::size(kOffsets))];
  std::vector<uint8_t> good = Readdress(world, view, target, expected + offset, choose);
  if (good.empty()) return;
  world.Deliver(good, false);
  for (int n = static_cast<int>(choose.Take(3)); n > 0; --n) {
    std::vector<uint8_t> bad = good;
    switch (choose.Take(6)) {
      case 0:  // the network repeated it
        world.Deliver(bad, false);
        break;
      case 1:  // a bad ICRC
        bad.back() ^= static_cast<uint8_t>(1 + choose.Take(255));
        // Over IPv4 the receiver accepts the ICRC of any IP ID (a socket does
        // not show it): 2^16 of the 2^32 changes are another ID's, and that
        // packet is good, as the network may have sent it.
        world.Deliver(bad, !IsAnotherIpv4IdsIcrc(world.net(), good, bad), "bad ICRC");
        break;
      case 2:  // for a QP nobody has
        bad[5] = kNobodysQpn >> 16, bad[6] = (kNobodysQpn >> 8) & 0xFF, bad[7] = kNobodysQpn & 0xFF;
        Reseal(world.net(), bad);
        world.Deliver(bad, true, "nobody's QPN");
        break;
      case 3: {  // an opcode nobody defined
        static constexpr uint8_t kUnknown[] = {0x18, 0x1F, 0x3F, 0x5F, 0x7F, 0xDF, 0xFF};
        bad[0] = kUnknown[choose.Take(std::size(kUnknown))];
        Reseal(world.net(), bad);
        world.Deliver(bad, sr::FindOpcode(bad[0]) == nullptr, "unknown opcode");
        break;
      }
      case 4:  // cut short, ICRC left as it was
        bad.resize(choose.Take(bad.size()));
        world.Deliver(bad, true, "cut short");
        break;
      case 5:  // cut short and sealed again: the lengths must not fit any more
        bad.resize(choose.Take(bad.size()));
        Reseal(world.net(), bad);
        world.Deliver(bad, false);
        break;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static World world;
  const std::span<const uint8_t> input(data, size);
  Choices choose{Hash(input)};
  // A datagram of the corpus, or (mutated beyond the IP header) the bytes
  // themselves as a UDP payload.
  std::span<const uint8_t> udp = input;
  sr::DatagramView datagram;
  if (sr::ParseDatagram(input, &datagram).ok()) udp = datagram.udp_payload;
  sr::PacketView view;
  if (sr::ParseTransport(udp, &view).ok()) {
    DeliverParsed(world, view, choose);
  } else {
    // Not a packet the codec takes: as it is, and sealed (the codec's
    // refusal must come before the ICRC's). Both must be dropped.
    std::vector<uint8_t> raw(udp.begin(), udp.end());
    world.Deliver(raw, true, "unparsed");
    Reseal(world.net(), raw);
    world.Deliver(raw, true, "unparsed, sealed");
  }
  world.Settle();
  return 0;
}
