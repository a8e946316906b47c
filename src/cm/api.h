// The operations behind librdmacm's entry points (src/abi/rdmacm). Each one
// has the semantics of its rdma_cm man page; failures return -1 (or NULL)
// with errno set, as the C API reports them.
#pragma once

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "cm/event_channel.h"

namespace softrdma::cm {

rdma_event_channel* CreateEventChannel();
void DestroyEventChannel(rdma_event_channel* channel);
int CreateId(rdma_event_channel* channel, rdma_cm_id** id, void* context, rdma_port_space ps);
int DestroyId(rdma_cm_id* id);
int BindAddr(rdma_cm_id* id, sockaddr* addr);
int ResolveAddr(rdma_cm_id* id, sockaddr* src, sockaddr* dst, int timeout_ms);
int ResolveRoute(rdma_cm_id* id, int timeout_ms);
int Listen(rdma_cm_id* id, int backlog);
int Connect(rdma_cm_id* id, rdma_conn_param* param);
int AcceptConnection(rdma_cm_id* id, rdma_conn_param* param);
int RejectConnection(rdma_cm_id* id, const void* private_data, uint8_t len);
int DisconnectId(rdma_cm_id* id);
int EstablishId(rdma_cm_id* id);
int Notify(rdma_cm_id* id, ibv_event_type event);
int GetCmEvent(rdma_event_channel* channel, rdma_cm_event** event);
int AckCmEvent(rdma_cm_event* event);
int MigrateId(rdma_cm_id* id, rdma_event_channel* channel);
int SetOption(rdma_cm_id* id, int level, int optname, void* optval, size_t optlen);
int InitQpAttr(rdma_cm_id* id, ibv_qp_attr* qp_attr, int* qp_attr_mask);
int CreateQp(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* attr);
int CreateQpEx(rdma_cm_id* id, ibv_qp_init_attr_ex* attr);
void DestroyQp(rdma_cm_id* id);
int GetRequest(rdma_cm_id* listen, rdma_cm_id** id);
int CreateEp(rdma_cm_id** id, rdma_addrinfo* res, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr);
void DestroyEp(rdma_cm_id* id);
int CreateSrq(rdma_cm_id* id, ibv_pd* pd, ibv_srq_init_attr* attr);
int CreateSrqEx(rdma_cm_id* id, ibv_srq_init_attr_ex* attr);
int DestroySrq(rdma_cm_id* id);
ibv_context** GetDevices(int* num_devices);
void FreeDevices(ibv_context** list);
__be16 GetSrcPort(rdma_cm_id* id);
__be16 GetDstPort(rdma_cm_id* id);
// For the calls of a synchronous id (created without a channel): waits for
// the event the call queued and leaves it in id->event; a failed one turns
// into -1 + errno. Returns 0 at once for an id with a channel.
int WaitForEvent(struct IdPrivate* id);

// Multicast (multicast.cpp).
int JoinMulticast(rdma_cm_id* id, const sockaddr* addr, uint16_t join_flags, void* context);
// rdma_join_multicast_ex: the attribute checks librdmacm makes, then JoinMulticast.
int JoinMulticastEx(rdma_cm_id* id, rdma_cm_join_mc_attr_ex* attr, void* context);
int LeaveMulticast(rdma_cm_id* id, const sockaddr* addr);
// Completes a MULTICAST_JOIN event as it is handed to the application: the
// id's QP joins the group then (librdmacm attaches it at that moment too);
// a failed attach turns the event into MULTICAST_ERROR.
void DeliverMulticastJoin(EventPrivate* event);

int GetAddrInfo(const char* node, const char* service, const rdma_addrinfo* hints,
                rdma_addrinfo** res);
void FreeAddrInfo(rdma_addrinfo* res);

}  // namespace softrdma::cm
