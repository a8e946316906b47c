// UD multicast through rdma_cm: rdma_join_multicast(_ex) gives
// MULTICAST_JOIN with the group's address handle, QPN 0xFFFFFF, the UDP
// Q_Key and the join's context, and attaches the id's QP when the event is
// read (not for a send-only join); datagrams sent to the group arrive;
// rdma_leave_multicast detaches; and the calls refuse what librdmacm and
// the kernel refuse.

#include "rdmacm_fixture.h"

namespace softrdma::rdmacm_test {
namespace {

constexpr size_t kGrh = 40;
constexpr uint32_t kMulticastQpn = 0xffffff;

// A UD id resolved towards the multicast group `group` (which binds it to
// 127.0.0.1 or ::1), with a PD and a UD QP.
struct Member {
  rdma_event_channel* ch = nullptr;
  std::unique_ptr<Events> events;
  rdma_cm_id* id = nullptr;
  ibv_pd* pd = nullptr;

  bool Prepare(sockaddr* src, sockaddr* group, bool with_qp = true) {
    ch = NewChannel();
    if (ch == nullptr) return false;
    events = std::make_unique<Events>(ch);
    if (rdma_create_id(ch, &id, nullptr, RDMA_PS_UDP) != 0) return false;
    if (rdma_resolve_addr(id, src, group, 2000) != 0) return false;
    Event e = events->Await(RDMA_CM_EVENT_ADDR_RESOLVED, id);
    if (!e.ok || e.status != 0) return false;
    pd = ibv_alloc_pd(id->verbs);
    return pd != nullptr && (!with_qp || NewQp(id, pd, IBV_QPT_UD) != nullptr);
  }
  ~Member() {
    if (id != nullptr && id->qp != nullptr) rdma_destroy_qp(id);
    if (id != nullptr) rdma_destroy_id(id);
    if (pd != nullptr) ibv_dealloc_pd(pd);
    events.reset();
    if (ch != nullptr) rdma_destroy_event_channel(ch);
  }
};

TEST(CmMulticast, JoinReportsTheGroupAndDatagramsReachIt) {
  RunScenario([] {
    sockaddr_in src = Ipv4("127.0.0.1", 0);
    sockaddr_in group = Ipv4("239.9.8.7", 0);
    Member receiver, sender;
    ASSERT_TRUE(receiver.Prepare(Sa(&src), Sa(&group))) << strerror(errno);
    ASSERT_TRUE(sender.Prepare(Sa(&src), Sa(&group))) << strerror(errno);
    Mem rx;
    ASSERT_TRUE(rx.Register(receiver.pd, kGrh + 64));
    ASSERT_EQ(PostRecv(receiver.id->qp, &rx, 0, kGrh + 64), 0);

    int context_tag = 0;
    ASSERT_EQ(rdma_join_multicast(receiver.id, Sa(&group), &context_tag), 0) << strerror(errno);
    Event joined = receiver.events->Await(RDMA_CM_EVENT_MULTICAST_JOIN, receiver.id);
    ASSERT_TRUE(joined.ok);
    EXPECT_EQ(joined.status, 0);
    EXPECT_EQ(joined.join_context, &context_tag);
    EXPECT_EQ(joined.ud.qp_num, kMulticastQpn);
    EXPECT_EQ(joined.ud.qkey, uint32_t(RDMA_UDP_QKEY));
    EXPECT_EQ(joined.ud.ah_attr.is_global, 1);
    const uint8_t mgid[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 239, 9, 8, 7};
    EXPECT_EQ(std::memcmp(joined.ud.ah_attr.grh.dgid.raw, mgid, 16), 0);

    rdma_cm_join_mc_attr_ex attr{};
    attr.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
    attr.addr = Sa(&group);
    attr.join_flags = RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER;
    ASSERT_EQ(rdma_join_multicast_ex(sender.id, &attr, nullptr), 0) << strerror(errno);
    Event sjoined = sender.events->Await(RDMA_CM_EVENT_MULTICAST_JOIN, sender.id);
    ASSERT_TRUE(sjoined.ok);
    // Send-only: the sender's QP was not attached, so there is nothing to detach.
    EXPECT_EQ(ibv_detach_mcast(sender.id->qp, &sjoined.ud.ah_attr.grh.dgid, 0), EINVAL);

    ibv_ah* ah = ibv_create_ah(sender.pd, &sjoined.ud.ah_attr);
    ASSERT_NE(ah, nullptr) << strerror(errno);
    Mem tx;
    ASSERT_TRUE(tx.Register(sender.pd, 64));
    std::memcpy(tx.buf.data(), "to the group", 12);
    ASSERT_EQ(PostSend(sender.id->qp, &tx, 0, 12, 9, ah, sjoined.ud.qp_num, sjoined.ud.qkey), 0);
    EXPECT_TRUE(ExpectCompletion(sender.id->send_cq, IBV_WC_SEND));
    ibv_wc wc{};
    ASSERT_TRUE(ExpectCompletion(receiver.id->recv_cq, IBV_WC_RECV, &wc));
    EXPECT_EQ(wc.byte_len, kGrh + 12);
    EXPECT_EQ(wc.src_qp, sender.id->qp->qp_num);
    EXPECT_EQ(std::memcmp(rx.buf.data() + kGrh, "to the group", 12), 0);
    EXPECT_EQ(ibv_destroy_ah(ah), 0);

    // While attached the QP cannot be destroyed; after leaving it can.
    EXPECT_EQ(ibv_destroy_qp(receiver.id->qp), EBUSY);
    ASSERT_EQ(rdma_leave_multicast(receiver.id, Sa(&group)), 0) << strerror(errno);
    EXPECT_EQ(rdma_leave_multicast(receiver.id, Sa(&group)), -1);
    EXPECT_EQ(errno, EADDRNOTAVAIL);
    ASSERT_EQ(rdma_leave_multicast(sender.id, Sa(&group)), 0) << strerror(errno);
  });
}

TEST(CmMulticast, IPv6GroupOnASynchronousId) {
  RunScenario([] {
    sockaddr_in6 src = Ipv6("::1", 0);
    sockaddr_in6 group = Ipv6("ff0e::77", 0);
    rdma_cm_id* id = nullptr;
    ASSERT_EQ(rdma_create_id(nullptr, &id, nullptr, RDMA_PS_UDP), 0);
    ASSERT_EQ(rdma_resolve_addr(id, Sa(&src), Sa(&group), 2000), 0) << strerror(errno);
    ibv_pd* pd = ibv_alloc_pd(id->verbs);
    ASSERT_NE(pd, nullptr);
    ASSERT_NE(NewQp(id, pd, IBV_QPT_UD), nullptr);
    // A synchronous id's call returns with its event in id->event, the QP
    // already attached.
    ASSERT_EQ(rdma_join_multicast(id, Sa(&group), nullptr), 0) << strerror(errno);
    ASSERT_NE(id->event, nullptr);
    EXPECT_EQ(id->event->event, RDMA_CM_EVENT_MULTICAST_JOIN);
    EXPECT_EQ(std::memcmp(id->event->param.ud.ah_attr.grh.dgid.raw, group.sin6_addr.s6_addr, 16),
              0);
    EXPECT_EQ(ibv_destroy_qp(id->qp), EBUSY);
    ASSERT_EQ(rdma_leave_multicast(id, Sa(&group)), 0);
    rdma_destroy_qp(id);
    EXPECT_EQ(rdma_destroy_id(id), 0);
    EXPECT_EQ(ibv_dealloc_pd(pd), 0);
  });
}

TEST(CmMulticast, RefusesWhatLibrdmacmAndTheKernelRefuse) {
  RunScenario([] {
    rdma_event_channel* ch = NewChannel();
    ASSERT_NE(ch, nullptr);
    sockaddr_in group = Ipv4("239.1.1.1", 0);
    rdma_cm_id* unbound = nullptr;
    ASSERT_EQ(rdma_create_id(ch, &unbound, nullptr, RDMA_PS_UDP), 0);
    // Not bound to a device yet.
    EXPECT_EQ(rdma_join_multicast(unbound, Sa(&group), nullptr), -1);
    EXPECT_EQ(errno, EINVAL);
    // Nothing joined: nothing to leave.
    EXPECT_EQ(rdma_leave_multicast(unbound, Sa(&group)), -1);
    EXPECT_EQ(errno, EADDRNOTAVAIL);

    sockaddr_in lo = Ipv4("127.0.0.1", 0);
    ASSERT_EQ(rdma_bind_addr(unbound, Sa(&lo)), 0) << strerror(errno);
    sockaddr_in unicast = Ipv4("127.0.0.1", 0);
    EXPECT_EQ(rdma_join_multicast(unbound, Sa(&unicast), nullptr), -1);
    EXPECT_EQ(errno, EINVAL);

    rdma_cm_join_mc_attr_ex attr{};
    attr.addr = Sa(&group);
    attr.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS;  // no join flags
    EXPECT_EQ(rdma_join_multicast_ex(unbound, &attr, nullptr), -1);
    EXPECT_EQ(errno, EINVAL);
    attr.comp_mask = RDMA_CM_JOIN_MC_ATTR_RESERVED;
    EXPECT_EQ(rdma_join_multicast_ex(unbound, &attr, nullptr), -1);
    EXPECT_EQ(errno, ENOTSUP);
    attr.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
    attr.join_flags = RDMA_MC_JOIN_FLAG_RESERVED;
    EXPECT_EQ(rdma_join_multicast_ex(unbound, &attr, nullptr), -1);
    EXPECT_EQ(errno, EINVAL);

    // Bound to 127.0.0.1 and asked properly: joined.
    attr.join_flags = RDMA_MC_JOIN_FLAG_FULLMEMBER;
    EXPECT_EQ(rdma_join_multicast_ex(unbound, &attr, nullptr), 0) << strerror(errno);
    Events events(ch);
    EXPECT_TRUE(events.Await(RDMA_CM_EVENT_MULTICAST_JOIN, unbound).ok);
    EXPECT_EQ(rdma_leave_multicast(unbound, Sa(&group)), 0);

    // Multicast is for UD ids.
    rdma_cm_id* tcp = nullptr;
    ASSERT_EQ(rdma_create_id(ch, &tcp, nullptr, RDMA_PS_TCP), 0);
    ASSERT_EQ(rdma_bind_addr(tcp, Sa(&lo)), 0);
    EXPECT_EQ(rdma_join_multicast(tcp, Sa(&group), nullptr), -1);
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(rdma_destroy_id(tcp), 0);
    EXPECT_EQ(rdma_destroy_id(unbound), 0);
    rdma_destroy_event_channel(ch);
  });
}

}  // namespace
}  // namespace softrdma::rdmacm_test
