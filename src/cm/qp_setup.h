// The QP side of rdma_cm: creating a QP (and the CQs it needs) on an id, the
// attributes of each transition as the CM negotiated them
// (rdma_init_qp_attr; ib-cm.md §4), and the transitions the CM makes on the
// application's behalf.
#pragma once

#include <infiniband/verbs.h>

#include "cm/cm_id.h"

namespace softrdma::cm {

// rdma_init_qp_attr: fills the attributes and mask for moving the id's QP to
// qp_attr->qp_state (INIT, RTR or RTS). EINVAL for another state or an id
// not far enough in its connection.
int InitQpAttr(IdPrivate* id, ibv_qp_attr* qp_attr, int* qp_attr_mask);

// After creation: RC/UC QPs to INIT, UD QPs through INIT, RTR and RTS.
int PrepareNewQp(IdPrivate* id);
// Once the peer's parameters are known: INIT (again, with the negotiated
// access flags), RTR, RTS. Returns an errno value (0 = success).
int ConnectQp(IdPrivate* id);
void QpToError(IdPrivate* id);

// The address vector towards the peer (grh from the route).
void BuildAhAttr(IdPrivate* id, ibv_ah_attr* ah_attr);

}  // namespace softrdma::cm
