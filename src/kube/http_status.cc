#include "kube/http_status.h"

#include <nlohmann/json.hpp>

namespace certmount::kube {

Status StatusFromHttp(long http_status, const std::string& body) {
  std::string reason;
  std::string message;
  nlohmann::json parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object()) {
    // A field of another type (a hostile or broken server) is ignored:
    // json::value would throw.
    auto text_field = [&](const char* key) {
      auto found = parsed.find(key);
      return found != parsed.end() && found->is_string() ? found->get<std::string>() : "";
    };
    reason = text_field("reason");
    message = text_field("message");
  }
  if (message.empty()) message = body.substr(0, 200);
  std::string text = "API server answered " + std::to_string(http_status) +
                     (reason.empty() ? "" : " " + reason) + ": " + message;
  switch (http_status) {
    case 400:
    case 422:
      return Status::InvalidArgument(std::move(text));
    case 401:
    case 403:
      return Status::PermissionDenied(std::move(text));
    case 404:
      return Status::NotFound(std::move(text));
    case 409:
      return Status::AlreadyExists(std::move(text));
    case 410:
      return Status::Aborted(std::move(text));
    case 429:
      return Status::ResourceExhausted(std::move(text));
    default:
      if (http_status >= 500) return Status::Unavailable(std::move(text));
      return Status::Internal(std::move(text));
  }
}

bool IsGone(const Status& status) { return status.code() == Code::kAborted; }

bool IsRetryableHttp(long http_status) { return http_status == 429 || http_status >= 500; }

}  // namespace certmount::kube
