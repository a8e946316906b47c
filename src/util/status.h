// A minimal error type for the layers that talk to the operating system: an
// errno value (0 = success) plus a human-readable message. Verbs report errno
// values to applications, so carrying the errno through unchanged avoids a
// translation table between our errors and theirs.
#pragma once

#include <string>
#include <utility>

namespace softrdma {

class Status {
 public:
  Status() = default;

  bool ok() const { return code_ == 0; }
  int code() const { return code_; }
  const std::string& message() const { return message_; }

  static Status Ok() { return Status(); }
  static Status Error(int errno_code, std::string msg) {
    return Status(errno_code, std::move(msg));
  }

 private:
  Status(int code, std::string message) : code_(code), message_(std::move(message)) {}

  int code_ = 0;  // errno value, 0 = ok
  std::string message_;
};

}  // namespace softrdma
