// The exported SRQ and address-handle entry points. Plain forwards to the
// core (src/core/verbs_srq.cpp, verbs_ah.cpp); ibv_post_srq_recv,
// ibv_create_srq_ex and ibv_get_srq_num are header inlines that reach the
// core through the context's ops instead.
#include <infiniband/verbs.h>

#include "core/verbs.h"

#define SOFTRDMA_EXPORT extern "C" __attribute__((visibility("default")))

namespace v = softrdma::verbs;

SOFTRDMA_EXPORT ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* srq_init_attr) {
  return v::CreateSrq(pd, srq_init_attr);
}
SOFTRDMA_EXPORT int ibv_modify_srq(ibv_srq* srq, ibv_srq_attr* srq_attr, int srq_attr_mask) {
  return v::ModifySrq(srq, srq_attr, srq_attr_mask);
}
SOFTRDMA_EXPORT int ibv_query_srq(ibv_srq* srq, ibv_srq_attr* srq_attr) {
  return v::QuerySrq(srq, srq_attr);
}
SOFTRDMA_EXPORT int ibv_destroy_srq(ibv_srq* srq) {
  return v::DestroySrq(srq);
}
SOFTRDMA_EXPORT ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
  return v::CreateAh(pd, attr);
}
SOFTRDMA_EXPORT int ibv_destroy_ah(ibv_ah* ah) {
  return v::DestroyAh(ah);
}
SOFTRDMA_EXPORT int ibv_init_ah_from_wc(ibv_context* context, uint8_t port_num, ibv_wc* wc,
                                        ibv_grh* grh, ibv_ah_attr* ah_attr) {
  return v::InitAhFromWc(context, port_num, wc, grh, ah_attr);
}
SOFTRDMA_EXPORT ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh,
                                              uint8_t port_num) {
  return v::CreateAhFromWc(pd, wc, grh, port_num);
}
