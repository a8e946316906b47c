// Extended CQs (ibv_create_cq_ex and the ibv_start_poll / ibv_wc_read_*
// API), ibv_resize_cq and the device clock (ibv_query_rt_values_ex).
//
// An extended CQ is the same Cq object as one from ibv_create_cq, created
// with options: ibv_cq_ex_to_cq is a cast, ibv_poll_cq, ibv_req_notify_cq and
// the completion channel work on it unchanged. The poll API hands out one
// completion at a time: ibv_start_poll / ibv_next_poll take it off the queue
// into Cq::current, which the read_* accessors read until the next call.
#include <cerrno>

#include "core/cq.h"
#include "core/device.h"
#include "core/limits.h"
#include "core/objects.h"
#include "core/verbs.h"
#include "transport/engine.h"
#include "util/clock.h"

namespace softrdma::verbs {

namespace {

// What a completion can report here. CVLAN, flow tag and tag-matching info
// come from features softrdma has not got (raw Ethernet, flow steering, tag
// matching), so asking for them fails as on devices without them.
constexpr uint64_t kWcFlags = uint64_t{IBV_WC_STANDARD_FLAGS} |
                              IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
                              IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;
constexpr uint32_t kCreateFlags =
    IBV_CREATE_CQ_ATTR_SINGLE_THREADED | IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;

Cq* From(ibv_cq_ex* c) {
  return Cq::From(ibv_cq_ex_to_cq(c));
}

// Takes the next completion off the queue into cq->current.
int Advance(Cq* cq) {
  if (!cq->PopOne(&cq->current, &cq->current_ts, &cq->current_wallclock)) return ENOENT;
  cq->cqx.wr_id = cq->current.wr_id;
  cq->cqx.status = cq->current.status;
  return 0;
}

int StartPoll(ibv_cq_ex* cqx, ibv_poll_cq_attr* attr) {
  if (attr && attr->comp_mask) return EINVAL;
  Cq* cq = From(cqx);
  cq->poll_session.lock();
  int rc = Advance(cq);
  if (rc == ENOENT) {
    // As ibv_poll_cq, polling drives progress for a busy application; but
    // only when there is nothing to hand out. Draining the ring right after
    // the application re-armed the CQ would queue completions that fire an
    // event and are then consumed in this same session, leaving the event
    // pointing at an empty CQ, which ibv_rc_pingpong -t -e treats as fatal.
    Engine* engine = Engine::Get(nullptr);
    if (engine) engine->Progress();
    rc = Advance(cq);
    if (rc == ENOENT && engine) engine->PollFoundNothing();
  }
  // On ENOENT the caller must not call ibv_end_poll (ibv_create_cq_ex(3)).
  if (rc) cq->poll_session.unlock();
  return rc;
}

int NextPoll(ibv_cq_ex* cqx) {
  return Advance(From(cqx));
}

void EndPoll(ibv_cq_ex* cqx) {
  From(cqx)->poll_session.unlock();
}

const ibv_wc& Cur(ibv_cq_ex* cqx) {
  return From(cqx)->current;
}

ibv_wc_opcode ReadOpcode(ibv_cq_ex* c) {
  return Cur(c).opcode;
}
uint32_t ReadVendorErr(ibv_cq_ex* c) {
  return Cur(c).vendor_err;
}
uint32_t ReadByteLen(ibv_cq_ex* c) {
  return Cur(c).byte_len;
}
__be32 ReadImmData(ibv_cq_ex* c) {
  return Cur(c).imm_data;  // also the invalidated rkey (ibv_wc_read_invalidated_rkey)
}
uint32_t ReadQpNum(ibv_cq_ex* c) {
  return Cur(c).qp_num;
}
uint32_t ReadSrcQp(ibv_cq_ex* c) {
  return Cur(c).src_qp;
}
unsigned int ReadWcFlags(ibv_cq_ex* c) {
  return Cur(c).wc_flags;
}
uint32_t ReadSlid(ibv_cq_ex* c) {
  return Cur(c).slid;
}
uint8_t ReadSl(ibv_cq_ex* c) {
  return Cur(c).sl;
}
uint8_t ReadDlidPathBits(ibv_cq_ex* c) {
  return Cur(c).dlid_path_bits;
}
uint64_t ReadCompletionTs(ibv_cq_ex* c) {
  return From(c)->current_ts;
}
uint64_t ReadCompletionWallclockNs(ibv_cq_ex* c) {
  return From(c)->current_wallclock;
}
uint16_t ReadCvlan(ibv_cq_ex*) {
  return 0;
}
uint32_t ReadFlowTag(ibv_cq_ex*) {
  return 0;
}
void ReadTmInfo(ibv_cq_ex*, ibv_wc_tm_info* info) {
  if (info) *info = ibv_wc_tm_info{};
}

int CheckCqAttr(const ibv_cq_init_attr_ex& a) {
  // Unknown comp_mask bits: EINVAL (the v44 inline passes everything
  // through). A parent domain is the only PD allowed there, and softrdma has
  // none.
  if (a.comp_mask & ~uint32_t{IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD})
    return EINVAL;
  if ((a.comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) && a.parent_domain) return EINVAL;
  if (a.wc_flags & ~kWcFlags) return EOPNOTSUPP;
  if ((a.comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) && (a.flags & ~kCreateFlags)) return EOPNOTSUPP;
  return 0;
}

}  // namespace

ibv_cq_ex* CreateCqEx(ibv_context* context, ibv_cq_init_attr_ex* attr) {
  if (!attr) {
    errno = EINVAL;
    return nullptr;
  }
  if (int rc = CheckCqAttr(*attr)) {
    errno = rc;
    return nullptr;
  }
  if (attr->cqe > static_cast<uint32_t>(limits::kMaxCqe)) {
    errno = EINVAL;
    return nullptr;
  }
  ibv_cq* ibcq = CreateCq(context, static_cast<int>(attr->cqe), attr->cq_context, attr->channel,
                          static_cast<int>(attr->comp_vector));
  if (!ibcq) return nullptr;
  Cq* cq = Cq::From(ibcq);
  cq->EnableTimestamps(attr->wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP,
                       attr->wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK);
  if (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS)
    cq->set_ignore_overrun(attr->flags & IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN);
  // Every accessor is filled, requested or not: reading one that was not
  // requested is undefined in rdma-core, here it returns the value anyway.
  ibv_cq_ex& x = cq->cqx;
  x.start_poll = StartPoll;
  x.next_poll = NextPoll;
  x.end_poll = EndPoll;
  x.read_opcode = ReadOpcode;
  x.read_vendor_err = ReadVendorErr;
  x.read_byte_len = ReadByteLen;
  x.read_imm_data = ReadImmData;
  x.read_qp_num = ReadQpNum;
  x.read_src_qp = ReadSrcQp;
  x.read_wc_flags = ReadWcFlags;
  x.read_slid = ReadSlid;
  x.read_sl = ReadSl;
  x.read_dlid_path_bits = ReadDlidPathBits;
  x.read_completion_ts = ReadCompletionTs;
  x.read_cvlan = ReadCvlan;
  x.read_flow_tag = ReadFlowTag;
  x.read_tm_info = ReadTmInfo;
  x.read_completion_wallclock_ns = ReadCompletionWallclockNs;
  return &x;
}

int ResizeCq(ibv_cq* ibcq, int cqe) {
  if (!ibcq || cqe < 1 || cqe > limits::kMaxCqe) return EINVAL;
  return Cq::From(ibcq)->Resize(cqe);
}

// The device clock is CLOCK_MONOTONIC in nanoseconds (hca_core_clock =
// 1 GHz in query_device_ex). Like mlx5, the raw counter is reported whole in
// tv_nsec, so that it compares directly with completion timestamps.
int QueryRtValues(ibv_context* context, ibv_values_ex* values) {
  if (!context || context->device != Device::Get().verbs_device() || !values) return EINVAL;
  uint32_t filled = 0;
  if (values->comp_mask & IBV_VALUES_MASK_RAW_CLOCK) {
    values->raw_clock.tv_sec = 0;
    values->raw_clock.tv_nsec = static_cast<long>(NowNs());
    filled |= IBV_VALUES_MASK_RAW_CLOCK;
  }
  values->comp_mask = filled;
  return 0;
}

}  // namespace softrdma::verbs
