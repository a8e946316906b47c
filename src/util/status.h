// A small status type in the LevelDB manner: an errno-style code (0 = ok) and
// a message for logs. Verbs report errors as errno values, so the code space
// is errno's; the message is for humans only.
#pragma once

#include <string>
#include <utility>

namespace softrdma {

class Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(int errno_code, std::string msg) {
    return Status(errno_code, std::move(msg));
  }

  bool ok() const { return code_ == 0; }
  int code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  Status(int code, std::string msg) : code_(code), message_(std::move(msg)) {}
  int code_ = 0;
  std::string message_;
};

}  // namespace softrdma
