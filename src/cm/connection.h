// The IB CM exchanges of ib-cm.md §6 and §7 for one id: what the application's
// calls send (connection.cpp) and what received messages do. All functions run
// with Service::mu held and return an errno value (0 = success).
#pragma once

#include <rdma/rdma_cma.h>

#include "cm/cm_id.h"
#include "cm/service.h"

namespace softrdma::cm {

int StartConnect(Service* service, IdPrivate* id, const rdma_conn_param* param);
int Accept(Service* service, IdPrivate* id, const rdma_conn_param* param);
int Reject(Service* service, IdPrivate* id, const void* private_data, uint8_t len);
int Disconnect(Service* service, IdPrivate* id);
int Establish(Service* service, IdPrivate* id);
int NotifyEstablished(Service* service, IdPrivate* id);
// Tells the peer that the id is going away (REJ, DREQ or DREP as its state
// requires), as the kernel does when an id is destroyed.
void AbandonConnection(Service* service, IdPrivate* id);

}  // namespace softrdma::cm
