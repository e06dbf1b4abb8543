// A small Kubernetes API client over libcurl: JSON requests with a deadline,
// cancellation, a client-side rate limit and retries of 429 and 5xx answers,
// plus line-by-line streaming for watches. Bodies are JSON text; callers
// parse them. The bearer token is never logged and never part of a Status.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/construction_key.h"
#include "common/status.h"
#include "kube/config.h"
#include "kube/rate_limiter.h"
#include "kube/sleeper.h"
#include "kube/token_source.h"

namespace certmount::kube {

struct ClientOptions {
  // Client-side rate limit, as client-go's QPS and Burst; qps <= 0 disables it.
  double qps = 5;
  int burst = 10;
  // Default: SystemClock::Instance(). Deadlines passed to the client are on
  // this clock's SteadyNow() scale. Must outlive the client.
  const Clock* clock = nullptr;
  // Default: a ClockSleeper on `clock`. Must outlive the client.
  Sleeper* sleeper = nullptr;
  // Retry backoff for 429 and 5xx answers without Retry-After: doubles from
  // initial_backoff up to max_backoff; at most max_attempts tries in all.
  std::chrono::milliseconds initial_backoff{250};
  std::chrono::milliseconds max_backoff{8000};
  int max_attempts = 8;
  // Bound on connecting (TCP and TLS), inside the call's deadline.
  std::chrono::milliseconds connect_timeout{5000};
};

struct Request {
  std::string method = "GET";
  // Absolute path with any query string, e.g. "/api/v1/namespaces/x/pods?limit=1".
  std::string path;
  // JSON body, sent when non-empty with Content-Type application/json, or
  // for a PATCH application/strategic-merge-patch+json.
  std::string body;
  // When non-empty, sent instead of the configured credentials' token (e.g. a
  // pod's own service account token).
  std::string bearer_token;
  // Who gets rate-limit tokens first when the request has no ApiBudget.
  // Last, so that {method, path, body, token} initialisations keep working.
  ApiPriority priority = ApiPriority::kBackground;
};

struct Response {
  long http_status = 0;
  std::string body;
};

class Client;

// Rate-limit tokens taken ahead, all together, for the calls of one
// operation, so that an operation that could not finish within its deadline
// fails before it spends any on calls to the API server. Obtained from
// Client::Reserve and spent by Client::Call, one token per try. The tokens
// not spent go back to the client's limit when it is destroyed: they were
// never used against the API server. Move-only; one operation uses it at a
// time (not thread-safe). Must not outlive its client.
class ApiBudget {
 public:
  // No tokens; calls made with it wait for tokens at kBackground.
  ApiBudget() = default;
  ApiBudget(ApiBudget&& other) noexcept;
  ApiBudget& operator=(ApiBudget&& other) noexcept;
  ApiBudget(const ApiBudget&) = delete;
  ApiBudget& operator=(const ApiBudget&) = delete;
  ~ApiBudget();

  // Tokens left to spend.
  int remaining() const { return remaining_; }
  // The priority calls made with it wait at once its tokens are spent.
  ApiPriority priority() const { return priority_; }

 private:
  friend class Client;
  ApiBudget(RateLimiter* limiter, int tokens, ApiPriority priority)
      : limiter_(limiter), remaining_(tokens), priority_(priority) {}
  // Gives the tokens left back to limiter_ and empties the budget.
  void Release();

  RateLimiter* limiter_ = nullptr;
  int remaining_ = 0;
  ApiPriority priority_ = ApiPriority::kBackground;
};

// Percent-encodes `text` for a query parameter value.
std::string QueryEscape(std::string_view text);

class Client {
 public:
  // INVALID_ARGUMENT when the config has no https:// or http:// server.
  static Result<std::unique_ptr<Client>> Create(KubeConfig config, ClientOptions options = {});
  // For Create only.
  Client(ConstructionKey<Client>, KubeConfig config, ClientOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Takes rate-limit tokens for `calls` calls of one operation at
  // `priority`, all together or none (RateLimiter::Acquire: at most the
  // burst, so an operation of more calls waits for the rest as it makes
  // them; DEADLINE_EXCEEDED at once when they could not come before
  // `deadline`, CANCELLED on `stop`). Thread-safe.
  Result<ApiBudget> Reserve(int calls, ApiPriority priority,
                            std::chrono::steady_clock::time_point deadline, std::stop_token stop);

  // Sends `request` and returns a 2xx answer. Other answers become a Status
  // (see http_status.h); 429 and 5xx are retried after Retry-After (whole
  // seconds) or the backoff, as long as the retry can start before
  // `deadline`, else the last answer's Status is returned. Transport
  // failures are not retried: connection refused, unresolvable host or TLS
  // failure UNAVAILABLE, running out of time DEADLINE_EXCEEDED, `stop`
  // CANCELLED. Every try first takes a rate-limit token: one of `budget`'s
  // when it has one left (it must come from this client's Reserve), else it
  // waits for one at the budget's priority, or without a budget at
  // `request.priority`. Thread-safe (but a budget is one caller's).
  Result<Response> Call(const Request& request, std::chrono::steady_clock::time_point deadline,
                        std::stop_token stop, ApiBudget* budget = nullptr);

  // Sends `request` once (after a rate-limit token at `request.priority`)
  // and, on a 2xx answer, calls `on_line` with each newline-terminated line
  // of the body (without the newline) as it arrives, until the server ends
  // the body (OK), `on_line` returns false (OK), `deadline` passes
  // (DEADLINE_EXCEEDED) or `stop` is requested (CANCELLED). A non-2xx
  // answer is its Status and `on_line` is not called. Thread-safe.
  Status Stream(const Request& request, std::chrono::steady_clock::time_point deadline,
                std::stop_token stop, const std::function<bool(std::string_view)>& on_line);

  const Clock& clock() const { return *clock_; }
  Sleeper& sleeper() { return *sleeper_; }

 private:
  struct CurlHandle;
  struct Attempt;

  // One HTTP exchange; a transport failure is the Status, otherwise the
  // answer whatever its code.
  Result<Response> Send(const Request& request, std::chrono::steady_clock::time_point deadline,
                        std::stop_token stop, const std::function<bool(std::string_view)>* on_line,
                        std::string* retry_after);

  // The rate-limit token for one try of `request`: from `budget` (may be
  // null) while it has any, else waited for (RateLimiter::Acquire).
  Status TakeToken(const Request& request, std::chrono::steady_clock::time_point deadline,
                   std::stop_token stop, ApiBudget* budget);

  std::unique_ptr<CurlHandle> TakeHandle();
  void ReturnHandle(std::unique_ptr<CurlHandle> handle);

  const KubeConfig config_;
  const ClientOptions options_;
  const Clock* clock_;
  std::unique_ptr<Sleeper> owned_sleeper_;
  Sleeper* sleeper_;
  RateLimiter limiter_;
  TokenSource tokens_;
  std::mutex handles_mutex_;
  // Idle easy handles, kept for their connection caches (keep-alive).
  std::vector<std::unique_ptr<CurlHandle>> idle_handles_;
};

}  // namespace certmount::kube
