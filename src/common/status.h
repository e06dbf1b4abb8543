// Errors as values. Every layer below src/csi/ reports failure through
// Status or Result<T>; src/csi/grpc_status.cc is the one place that turns a
// Code into a gRPC status code.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace certmount {

// The outcomes the domain distinguishes. They mirror the gRPC codes that
// kubelet reacts to, so the mapping in src/csi/ is one-to-one.
enum class Code {
  kOk,
  kInvalidArgument,     // caller's input is wrong; retrying the same call fails again
  kNotFound,            // the named object does not exist
  kAlreadyExists,       // conflicts with an existing object
  kFailedPrecondition,  // the system is not in a state to do this (e.g. denied request)
  kPermissionDenied,    // the signer refused the caller
  kUnavailable,         // transient: a dependency cannot be reached; retry later
  kDeadlineExceeded,    // transient: the operation ran out of time
  kAborted,             // a concurrent operation on the same object is in flight
  kResourceExhausted,   // rate limits or capacity
  kCancelled,           // the caller went away or shutdown began
  kUnimplemented,       // not supported by this driver
  kDataLoss,            // the database or a file is damaged
  kInternal,            // a bug or an unexpected system error
};

// Human-readable name of a code, e.g. "INVALID_ARGUMENT".
const char* CodeName(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  static Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
  static Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
  static Status AlreadyExists(std::string m) { return {Code::kAlreadyExists, std::move(m)}; }
  static Status FailedPrecondition(std::string m) {
    return {Code::kFailedPrecondition, std::move(m)};
  }
  static Status PermissionDenied(std::string m) { return {Code::kPermissionDenied, std::move(m)}; }
  static Status Unavailable(std::string m) { return {Code::kUnavailable, std::move(m)}; }
  static Status DeadlineExceeded(std::string m) { return {Code::kDeadlineExceeded, std::move(m)}; }
  static Status Aborted(std::string m) { return {Code::kAborted, std::move(m)}; }
  static Status ResourceExhausted(std::string m) {
    return {Code::kResourceExhausted, std::move(m)};
  }
  static Status Cancelled(std::string m) { return {Code::kCancelled, std::move(m)}; }
  static Status Unimplemented(std::string m) { return {Code::kUnimplemented, std::move(m)}; }
  static Status DataLoss(std::string m) { return {Code::kDataLoss, std::move(m)}; }
  static Status Internal(std::string m) { return {Code::kInternal, std::move(m)}; }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // "CODE: message", for logs and test failure output.
  std::string ToString() const;

  // Returns a copy, keeping the code, whose message is "<context>: <message>";
  // the separator is added here, so `context` must not end with one. An
  // empty context leaves the message as it was. OK stays OK.
  Status WithContext(std::string_view context) const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : value_(std::move(status)) {}  // NOLINT: must not be ok

  bool ok() const { return std::holds_alternative<T>(value_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(value_);
  }
  T& value() & { return std::get<T>(value_); }
  const T& value() const& { return std::get<T>(value_); }
  T&& value() && { return std::get<T>(std::move(value_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> value_;
};

}  // namespace certmount

// Returns from the enclosing function when `expr` (a Status) is not ok.
#define CERTMOUNT_RETURN_IF_ERROR(expr)                    \
  do {                                                     \
    ::certmount::Status certmount_status_ = (expr);        \
    if (!certmount_status_.ok()) return certmount_status_; \
  } while (0)

#define CERTMOUNT_CONCAT_INNER(a, b) a##b
#define CERTMOUNT_CONCAT(a, b) CERTMOUNT_CONCAT_INNER(a, b)

// Declares `lhs` from a Result expression, returning its Status on failure.
#define CERTMOUNT_ASSIGN_OR_RETURN(lhs, expr)                      \
  auto CERTMOUNT_CONCAT(certmount_result_, __LINE__) = (expr);     \
  if (!CERTMOUNT_CONCAT(certmount_result_, __LINE__).ok())         \
    return CERTMOUNT_CONCAT(certmount_result_, __LINE__).status(); \
  lhs = std::move(CERTMOUNT_CONCAT(certmount_result_, __LINE__)).value()
