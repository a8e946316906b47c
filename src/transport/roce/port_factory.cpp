#include "transport/roce/port_factory.h"

#include <cerrno>

namespace softrdma::transport::roce {

std::unique_ptr<softrdma::roce::PacketPort> OpenPacketPort(Status* err) {
  // The UDP port (UDP 4791, demultiplexing to the owning process) is not
  // built yet: until it is, only an in-process port set by a test exists.
  *err = Status::Error(ENOSYS, "the UDP port of the RoCE wire is not implemented yet");
  return nullptr;
}

}  // namespace softrdma::transport::roce
