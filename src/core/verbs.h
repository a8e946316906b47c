// The verbs, implemented over the core objects. The C ABI layer
// (src/abi/verbs) forwards each exported rdma-core entry point here and adds
// nothing but argument translation. Conventions follow rdma-core: functions
// returning a pointer return nullptr and set errno on failure; functions
// returning int return 0 or an errno value (except where rdma-core's own
// convention differs, noted at the function).
#pragma once

#include <sys/types.h>

#include <infiniband/verbs.h>

namespace softrdma {
class Qp;
}

namespace softrdma::verbs {

// --- device (verbs_device.cpp)
ibv_device** GetDeviceList(int* num_devices);
void FreeDeviceList(ibv_device** list);
const char* GetDeviceName(ibv_device* device);
__be64 GetDeviceGuid(ibv_device* device);
int GetDeviceIndex(ibv_device* device);  // -1 + errno if not ours
ibv_context* OpenDevice(ibv_device* device);
// ibv_import_device: a context over another context's cmd_fd (which it
// takes over). EINVAL if the descriptor is not a softrdma context's.
ibv_context* ImportDevice(int cmd_fd);
int CloseDevice(ibv_context* context);
int QueryDevice(ibv_context* context, ibv_device_attr* attr);
int QueryDeviceEx(ibv_context* context, const ibv_query_device_ex_input* input,
                  ibv_device_attr_ex* attr, size_t attr_size);
// Writes at most `len` bytes of ibv_port_attr (older callers pass less).
int QueryPort(ibv_context* context, uint8_t port_num, ibv_port_attr* attr, size_t len);
int QueryGid(ibv_context* context, uint8_t port_num, int index, ibv_gid* gid);
int QueryGidEx(ibv_context* context, uint32_t port_num, uint32_t gid_index, ibv_gid_entry* entry,
               uint32_t flags, size_t entry_size);  // positive errno, ENODATA for an empty slot
ssize_t QueryGidTable(ibv_context* context, ibv_gid_entry* entries, size_t max_entries,
                      uint32_t flags, size_t entry_size);  // count or negative errno
// sysfs encoding: 0 = "IB/RoCE v1", 1 = "RoCE v2". Returns 0 or -1 (+errno).
int QueryGidType(ibv_context* context, uint8_t port_num, unsigned int index, int* type);
int QueryPkey(ibv_context* context, uint8_t port_num, int index, __be16* pkey);
int GetPkeyIndex(ibv_context* context, uint8_t port_num, __be16 pkey);  // index or -1
int GetAsyncEvent(ibv_context* context, ibv_async_event* event);        // 0 or -1 + errno
void AckAsyncEvent(ibv_async_event* event);
int ForkInit();
ibv_fork_status IsForkInitialized();

// --- PD and MR (verbs_pd_mr.cpp)
ibv_pd* AllocPd(ibv_context* context);
int DeallocPd(ibv_pd* pd);
ibv_mr* RegMr(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned int access);
int DeregMr(ibv_mr* mr);

// --- sharing PDs and MRs through cmd_fd (verbs_import.cpp)
ibv_pd* ImportPd(ibv_context* context, uint32_t pd_handle);
void UnimportPd(ibv_pd* pd);
ibv_mr* ImportMr(ibv_pd* pd, uint32_t mr_handle);
void UnimportMr(ibv_mr* mr);

// --- memory windows (verbs_mw.cpp): context ops alloc_mw, dealloc_mw, bind_mw
ibv_mw* AllocMw(ibv_pd* pd, ibv_mw_type type);
int DeallocMw(ibv_mw* mw);
int BindMw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* bind);

// --- CQ and completion channel (verbs_cq.cpp)
ibv_comp_channel* CreateCompChannel(ibv_context* context);
int DestroyCompChannel(ibv_comp_channel* channel);
ibv_cq* CreateCq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                 int comp_vector);
int DestroyCq(ibv_cq* cq);
int PollCq(ibv_cq* cq, int num_entries, ibv_wc* wc);
int ReqNotifyCq(ibv_cq* cq, int solicited_only);
int GetCqEvent(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context);  // 0 or -1 + errno
void AckCqEvents(ibv_cq* cq, unsigned int nevents);

// --- QP (verbs_qp.cpp)
ibv_qp* CreateQp(ibv_pd* pd, ibv_qp_init_attr* attr);
int ModifyQp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask);
int QueryQp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask, ibv_qp_init_attr* init_attr);
int DestroyQp(ibv_qp* qp);
int PostSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr);
int PostRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);

// --- UD multicast (verbs_mcast.cpp): 0 or an errno value (errno set too)
int AttachMcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid);
int DetachMcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid);

// Creates a QP whose arguments were validated; pd and CQs may be NULL (XRC).
ibv_qp* BuildQp(ibv_context* context, ibv_pd* pd, ibv_qp_init_attr* attr);

// --- SRQ (verbs_srq.cpp)
ibv_srq* CreateSrq(ibv_pd* pd, ibv_srq_init_attr* init);
ibv_srq* CreateSrqEx(ibv_context* context, ibv_srq_init_attr_ex* init);
int ModifySrq(ibv_srq* srq, ibv_srq_attr* attr, int mask);
int QuerySrq(ibv_srq* srq, ibv_srq_attr* attr);
int DestroySrq(ibv_srq* srq);
int PostSrqRecv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);
int GetSrqNum(ibv_srq* srq, uint32_t* srq_num);

// --- XRC (xrcd.cpp, verbs_xrc.cpp): verbs_context ops open_xrcd,
// close_xrcd, open_qp; the XRC halves of create_srq_ex, create_qp_ex,
// destroy_srq and destroy_qp.
ibv_xrcd* OpenXrcd(ibv_context* context, ibv_xrcd_init_attr* attr);
int CloseXrcd(ibv_xrcd* xrcd);
ibv_qp* OpenQp(ibv_context* context, ibv_qp_open_attr* attr);
// Fills in the XRC part of an SRQ MakeSrq created; 0 or errno.
int AttachXrcSrq(ibv_srq* srq, const ibv_srq_init_attr_ex& init);
void DetachXrcSrq(ibv_srq* srq);
ibv_qp* CreateXrcTargetQp(ibv_context* context, ibv_qp_init_attr_ex* attr);
// Drops one handle of an XRC target QP: true while others remain.
bool ReleaseXrcTarget(Qp& qp);
// The last handle is gone: unbind its SRQ, leave its domain.
void FinishXrcTarget(Qp& qp);
// Handles of another process's target QP (Qp::xrc_foreign).
int QueryForeignTarget(Qp& qp, ibv_qp_attr* attr, ibv_qp_init_attr* init_attr);
void DestroyForeignTarget(Qp* qp);

// --- AH (verbs_ah.cpp)
ibv_ah* CreateAh(ibv_pd* pd, ibv_ah_attr* attr);
int DestroyAh(ibv_ah* ah);
int InitAhFromWc(ibv_context* context, uint8_t port_num, ibv_wc* wc, ibv_grh* grh,
                 ibv_ah_attr* ah_attr);  // 0 or -1 + errno
ibv_ah* CreateAhFromWc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh, uint8_t port_num);

// --- extended verbs (verbs_qp_ex.cpp, verbs_cq_ex.cpp)
// verbs_context ops: create_qp_ex, create_cq_ex, query_rt_values.
ibv_qp* CreateQpEx(ibv_context* context, ibv_qp_init_attr_ex* attr);
ibv_qp_ex* QpToQpEx(ibv_qp* qp);  // NULL unless created with SEND_OPS_FLAGS
ibv_cq_ex* CreateCqEx(ibv_context* context, ibv_cq_init_attr_ex* attr);
int ResizeCq(ibv_cq* cq, int cqe);
int QueryRtValues(ibv_context* context, ibv_values_ex* values);
// rdma-core's convention: 0 or a negative IBV_REREG_MR_ERR_* code, errno set.
int ReregMr(ibv_mr* mr, int flags, ibv_pd* pd, void* addr, size_t length, int access);

}  // namespace softrdma::verbs
