#include "csi/grpc_status.h"

#include "common/logging.h"

namespace certmount {

grpc::Status ToGrpcStatus(const Status& status) {
  using grpc::StatusCode;
  StatusCode code = StatusCode::INTERNAL;
  switch (status.code()) {
    case Code::kOk:
      return grpc::Status::OK;
    case Code::kInvalidArgument:
      code = StatusCode::INVALID_ARGUMENT;
      break;
    case Code::kNotFound:
      code = StatusCode::NOT_FOUND;
      break;
    case Code::kAlreadyExists:
      code = StatusCode::ALREADY_EXISTS;
      break;
    case Code::kFailedPrecondition:
      code = StatusCode::FAILED_PRECONDITION;
      break;
    case Code::kPermissionDenied:
      code = StatusCode::PERMISSION_DENIED;
      break;
    case Code::kUnavailable:
      code = StatusCode::UNAVAILABLE;
      break;
    case Code::kDeadlineExceeded:
      code = StatusCode::DEADLINE_EXCEEDED;
      break;
    case Code::kAborted:
      code = StatusCode::ABORTED;
      break;
    case Code::kResourceExhausted:
      code = StatusCode::RESOURCE_EXHAUSTED;
      break;
    case Code::kCancelled:
      code = StatusCode::CANCELLED;
      break;
    case Code::kUnimplemented:
      code = StatusCode::UNIMPLEMENTED;
      break;
    case Code::kDataLoss:
      code = StatusCode::DATA_LOSS;
      break;
    case Code::kInternal:
      code = StatusCode::INTERNAL;
      break;
  }
  return grpc::Status(code, BoundMessage(status.message(), kMaxStatusMessageBytes));
}

}  // namespace certmount
