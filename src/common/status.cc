#include "common/status.h"

namespace certmount {
namespace {

constexpr std::string_view kSeparator = ": ";

}  // namespace

const char* CodeName(Code code) {
  switch (code) {
    case Code::kOk:
      return "OK";
    case Code::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case Code::kNotFound:
      return "NOT_FOUND";
    case Code::kAlreadyExists:
      return "ALREADY_EXISTS";
    case Code::kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case Code::kPermissionDenied:
      return "PERMISSION_DENIED";
    case Code::kUnavailable:
      return "UNAVAILABLE";
    case Code::kDeadlineExceeded:
      return "DEADLINE_EXCEEDED";
    case Code::kAborted:
      return "ABORTED";
    case Code::kResourceExhausted:
      return "RESOURCE_EXHAUSTED";
    case Code::kCancelled:
      return "CANCELLED";
    case Code::kUnimplemented:
      return "UNIMPLEMENTED";
    case Code::kDataLoss:
      return "DATA_LOSS";
    case Code::kInternal:
      return "INTERNAL";
  }
  return "INTERNAL";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(CodeName(code_)) + ": " + message_;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  if (context.empty()) return *this;
  return Status(code_, std::string(context) + std::string(kSeparator) + message_);
}

}  // namespace certmount
