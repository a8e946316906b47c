// Kernel struct conversions behind ibv_copy_qp_attr_from_kern,
// ibv_copy_ah_attr_from_kern, ibv_copy_path_rec_from_kern and
// ibv_copy_path_rec_to_kern.
#include <gtest/gtest.h>

#include <cstring>

#include "util/kern_abi_conv.h"

namespace softrdma {
namespace {

// Distinct, recognisable values per field so a swapped pair shows up.
ib_uverbs_ah_attr make_kern_ah(uint8_t seed) {
  ib_uverbs_ah_attr ah{};
  for (int i = 0; i < 16; ++i) ah.grh.dgid[i] = static_cast<uint8_t>(seed + i);
  ah.grh.flow_label = 0xabcde;
  ah.grh.sgid_index = 3;
  ah.grh.hop_limit = 64;
  ah.grh.traffic_class = 0x28;
  ah.dlid = 0x1234;
  ah.sl = 5;
  ah.src_path_bits = 0x11;
  ah.static_rate = IBV_RATE_100_GBPS;
  ah.is_global = 1;
  ah.port_num = 2;
  return ah;
}

void expect_ah_equal(const ibv_ah_attr& got, const ib_uverbs_ah_attr& want) {
  EXPECT_EQ(0, std::memcmp(got.grh.dgid.raw, want.grh.dgid, 16));
  EXPECT_EQ(got.grh.flow_label, want.grh.flow_label);
  EXPECT_EQ(got.grh.sgid_index, want.grh.sgid_index);
  EXPECT_EQ(got.grh.hop_limit, want.grh.hop_limit);
  EXPECT_EQ(got.grh.traffic_class, want.grh.traffic_class);
  EXPECT_EQ(got.dlid, want.dlid);
  EXPECT_EQ(got.sl, want.sl);
  EXPECT_EQ(got.src_path_bits, want.src_path_bits);
  EXPECT_EQ(got.static_rate, want.static_rate);
  EXPECT_EQ(got.is_global, want.is_global);
  EXPECT_EQ(got.port_num, want.port_num);
}

TEST(KernAbiConv, AhAttrFromKern) {
  const ib_uverbs_ah_attr kern = make_kern_ah(0xa0);
  ibv_ah_attr ah;
  std::memset(&ah, 0xee, sizeof(ah));
  copy_ah_attr_from_kern(ah, kern);
  expect_ah_equal(ah, kern);
  EXPECT_EQ(ah.dlid, 0x1234);  // host order on both sides: no byte swap
  EXPECT_EQ(ah.grh.dgid.raw[0], 0xa0);
  EXPECT_EQ(ah.grh.dgid.raw[15], 0xaf);
}

TEST(KernAbiConv, QpAttrFromKern) {
  ib_uverbs_qp_attr kern{};
  kern.qp_attr_mask = IBV_QP_STATE | IBV_QP_AV;
  kern.qp_state = IBV_QPS_RTR;
  kern.cur_qp_state = IBV_QPS_INIT;
  kern.path_mtu = IBV_MTU_2048;
  kern.path_mig_state = IBV_MIG_REARM;
  kern.qkey = 0x11111111;
  kern.rq_psn = 0x222222;
  kern.sq_psn = 0x333333;
  kern.dest_qp_num = 0x444444;
  kern.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  kern.ah_attr = make_kern_ah(0x10);
  kern.alt_ah_attr = make_kern_ah(0x80);
  kern.alt_ah_attr.dlid = 0x5678;
  kern.max_send_wr = 101;
  kern.max_recv_wr = 102;
  kern.max_send_sge = 103;
  kern.max_recv_sge = 104;
  kern.max_inline_data = 105;
  kern.pkey_index = 6;
  kern.alt_pkey_index = 7;
  kern.en_sqd_async_notify = 1;
  kern.sq_draining = 1;
  kern.max_rd_atomic = 8;
  kern.max_dest_rd_atomic = 9;
  kern.min_rnr_timer = 12;
  kern.port_num = 1;
  kern.timeout = 14;
  kern.retry_cnt = 7;
  kern.rnr_retry = 6;
  kern.alt_port_num = 2;
  kern.alt_timeout = 18;

  ibv_qp_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.rate_limit = 4242;
  copy_qp_attr_from_kern(attr, kern);

  EXPECT_EQ(attr.qp_state, IBV_QPS_RTR);
  EXPECT_EQ(attr.cur_qp_state, IBV_QPS_INIT);
  EXPECT_EQ(attr.path_mtu, IBV_MTU_2048);
  EXPECT_EQ(attr.path_mig_state, IBV_MIG_REARM);
  EXPECT_EQ(attr.qkey, 0x11111111u);
  EXPECT_EQ(attr.rq_psn, 0x222222u);
  EXPECT_EQ(attr.sq_psn, 0x333333u);
  EXPECT_EQ(attr.dest_qp_num, 0x444444u);
  EXPECT_EQ(attr.qp_access_flags, unsigned{IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ});
  EXPECT_EQ(attr.cap.max_send_wr, 101u);
  EXPECT_EQ(attr.cap.max_recv_wr, 102u);
  EXPECT_EQ(attr.cap.max_send_sge, 103u);
  EXPECT_EQ(attr.cap.max_recv_sge, 104u);
  EXPECT_EQ(attr.cap.max_inline_data, 105u);
  expect_ah_equal(attr.ah_attr, kern.ah_attr);
  expect_ah_equal(attr.alt_ah_attr, kern.alt_ah_attr);
  EXPECT_EQ(attr.alt_ah_attr.dlid, 0x5678);
  EXPECT_EQ(attr.pkey_index, 6);
  EXPECT_EQ(attr.alt_pkey_index, 7);
  EXPECT_EQ(attr.en_sqd_async_notify, 1);
  EXPECT_EQ(attr.sq_draining, 1);
  EXPECT_EQ(attr.max_rd_atomic, 8);
  EXPECT_EQ(attr.max_dest_rd_atomic, 9);
  EXPECT_EQ(attr.min_rnr_timer, 12);
  EXPECT_EQ(attr.port_num, 1);
  EXPECT_EQ(attr.timeout, 14);
  EXPECT_EQ(attr.retry_cnt, 7);
  EXPECT_EQ(attr.rnr_retry, 6);
  EXPECT_EQ(attr.alt_port_num, 2);
  EXPECT_EQ(attr.alt_timeout, 18);
  // No kernel counterpart: left as the caller set it.
  EXPECT_EQ(attr.rate_limit, 4242u);
}

ib_user_path_rec make_kern_path() {
  ib_user_path_rec rec{};
  for (int i = 0; i < 16; ++i) {
    rec.dgid[i] = static_cast<uint8_t>(0x10 + i);
    rec.sgid[i] = static_cast<uint8_t>(0x40 + i);
  }
  rec.dlid = htobe16(0x0102);
  rec.slid = htobe16(0x0304);
  rec.raw_traffic = 1;
  rec.flow_label = htobe32(0x000abcde);
  rec.reversible = 1;
  rec.mtu = IBV_MTU_4096;
  rec.pkey = htobe16(0xffff);
  rec.hop_limit = 0xfe;
  rec.traffic_class = 0x20;
  rec.numb_path = 3;
  rec.sl = 4;
  rec.mtu_selector = 2;
  rec.rate_selector = 2;
  rec.rate = IBV_RATE_40_GBPS;
  rec.packet_life_time_selector = 2;
  rec.packet_life_time = 18;
  rec.preference = 9;
  return rec;
}

TEST(KernAbiConv, PathRecFromKern) {
  const ib_user_path_rec kern = make_kern_path();
  ibv_sa_path_rec rec;
  std::memset(&rec, 0xcc, sizeof(rec));
  copy_path_rec_from_kern(rec, kern);

  EXPECT_EQ(0, std::memcmp(rec.dgid.raw, kern.dgid, 16));
  EXPECT_EQ(0, std::memcmp(rec.sgid.raw, kern.sgid, 16));
  // Network byte order on both sides: copied as is.
  EXPECT_EQ(be16toh(rec.dlid), 0x0102);
  EXPECT_EQ(be16toh(rec.slid), 0x0304);
  EXPECT_EQ(be32toh(rec.flow_label), 0x000abcdeu);
  EXPECT_EQ(be16toh(rec.pkey), 0xffff);
  EXPECT_EQ(rec.raw_traffic, 1);
  EXPECT_EQ(rec.reversible, 1);
  EXPECT_EQ(rec.mtu, IBV_MTU_4096);
  EXPECT_EQ(rec.hop_limit, 0xfe);
  EXPECT_EQ(rec.traffic_class, 0x20);
  EXPECT_EQ(rec.numb_path, 3);
  EXPECT_EQ(rec.sl, 4);
  EXPECT_EQ(rec.mtu_selector, 2);
  EXPECT_EQ(rec.rate_selector, 2);
  EXPECT_EQ(rec.rate, IBV_RATE_40_GBPS);
  EXPECT_EQ(rec.packet_life_time_selector, 2);
  EXPECT_EQ(rec.packet_life_time, 18);
  EXPECT_EQ(rec.preference, 9);
}

TEST(KernAbiConv, PathRecRoundTripIsLossless) {
  // ib_user_path_rec has no padding (64 bytes of fields), so every byte of
  // the kernel record must survive from_kern followed by to_kern.
  static_assert(sizeof(ib_user_path_rec) == 64);
  const ib_user_path_rec original = make_kern_path();
  ibv_sa_path_rec middle;
  std::memset(&middle, 0, sizeof(middle));
  copy_path_rec_from_kern(middle, original);
  ib_user_path_rec back;
  std::memset(&back, 0x5a, sizeof(back));
  copy_path_rec_to_kern(back, middle);
  EXPECT_EQ(0, std::memcmp(&back, &original, sizeof(back)));
}

TEST(KernAbiConv, PathRecToKern) {
  ibv_sa_path_rec rec{};
  rec.dgid.global.subnet_prefix = htobe64(0xfe80000000000000ull);
  rec.dgid.global.interface_id = htobe64(0x0200aabbccddeeffull);
  rec.dlid = htobe16(7);
  rec.slid = htobe16(8);
  rec.raw_traffic = 0;
  rec.flow_label = htobe32(0x12345);
  rec.reversible = 1;
  rec.mtu = IBV_MTU_1024;
  rec.pkey = htobe16(0x8001);
  rec.numb_path = 1;
  rec.sl = 15;
  rec.rate = IBV_RATE_10_GBPS;
  rec.packet_life_time = 31;

  ib_user_path_rec kern;
  std::memset(&kern, 0xff, sizeof(kern));
  copy_path_rec_to_kern(kern, rec);
  EXPECT_EQ(kern.dgid[0], 0xfe);
  EXPECT_EQ(kern.dgid[1], 0x80);
  EXPECT_EQ(kern.dgid[15], 0xff);
  EXPECT_EQ(kern.sgid[0], 0);  // zero-initialised source GID copied, not left 0xff
  EXPECT_EQ(be16toh(kern.dlid), 7);
  EXPECT_EQ(be16toh(kern.slid), 8);
  EXPECT_EQ(kern.raw_traffic, 0u);
  EXPECT_EQ(be32toh(kern.flow_label), 0x12345u);
  EXPECT_EQ(kern.reversible, 1u);
  EXPECT_EQ(kern.mtu, unsigned{IBV_MTU_1024});
  EXPECT_EQ(be16toh(kern.pkey), 0x8001);
  EXPECT_EQ(kern.numb_path, 1);
  EXPECT_EQ(kern.sl, 15);
  EXPECT_EQ(kern.rate, IBV_RATE_10_GBPS);
  EXPECT_EQ(kern.packet_life_time, 31);
  EXPECT_EQ(kern.preference, 0);
}

}  // namespace
}  // namespace softrdma
