#include "kube/client.h"

#include <curl/curl.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <utility>

#include "kube/http_status.h"

namespace certmount::kube {
namespace {

constexpr size_t kMaxBodyBytes = 64 << 20;

void GlobalInitOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct SlistFree {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};
using SlistPtr = std::unique_ptr<curl_slist, SlistFree>;

void AppendHeader(SlistPtr& list, const std::string& header) {
  curl_slist* extended = curl_slist_append(list.get(), header.c_str());
  if (extended != nullptr) {
    (void)list.release();
    list.reset(extended);
  }
}

std::chrono::milliseconds Remaining(const Clock& clock,
                                    std::chrono::steady_clock::time_point deadline) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock.SteadyNow());
}

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && text.substr(0, prefix.size()) == prefix;
}

// The server's CA, TLS verification and the client certificate from
// `config`.
void SetTlsOptions(CURL* curl, const KubeConfig& config) {
  // Blobs are copied by curl, so they need not outlive this call.
  if (!config.ca_pem.empty()) {
    curl_blob ca{const_cast<char*>(config.ca_pem.data()), config.ca_pem.size(), CURL_BLOB_COPY};
    curl_easy_setopt(curl, CURLOPT_CAINFO_BLOB, &ca);
  }
  if (config.insecure_skip_tls_verify) {
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  if (!config.client_certificate_pem.empty()) {
    curl_blob cert{const_cast<char*>(config.client_certificate_pem.data()),
                   config.client_certificate_pem.size(), CURL_BLOB_COPY};
    curl_blob key{const_cast<char*>(config.client_key_pem.data()), config.client_key_pem.size(),
                  CURL_BLOB_COPY};
    curl_easy_setopt(curl, CURLOPT_SSLCERT_BLOB, &cert);
    curl_easy_setopt(curl, CURLOPT_SSLCERTTYPE, "PEM");
    curl_easy_setopt(curl, CURLOPT_SSLKEY_BLOB, &key);
    curl_easy_setopt(curl, CURLOPT_SSLKEYTYPE, "PEM");
  }
}

// Headers (with `token` as the bearer token, if any), method and body of
// `request`. The returned list must outlive the transfer.
SlistPtr SetRequestOptions(CURL* curl, const Request& request, const std::string& token) {
  SlistPtr headers;
  AppendHeader(headers, "Accept: application/json");
  if (!token.empty()) AppendHeader(headers, "Authorization: Bearer " + token);
  if (!request.body.empty()) {
    AppendHeader(headers, request.method == "PATCH"
                              ? "Content-Type: application/strategic-merge-patch+json"
                              : "Content-Type: application/json");
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers.get());

  if (request.method == "POST") {
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
  } else if (request.method != "GET") {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }
  if (!request.body.empty() || request.method == "POST") {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(request.body.size()));
  }
  return headers;
}

}  // namespace

struct Client::CurlHandle {
  CURL* curl = curl_easy_init();
  ~CurlHandle() {
    if (curl != nullptr) curl_easy_cleanup(curl);
  }
};

// The state one transfer's callbacks share.
struct Client::Attempt {
  CURL* curl = nullptr;
  const Clock* clock = nullptr;
  std::chrono::steady_clock::time_point deadline;
  std::stop_token stop;
  const std::function<bool(std::string_view)>* on_line = nullptr;
  std::string* retry_after = nullptr;
  std::string body;
  std::string partial_line;
  bool streaming = false;
  bool ended_by_reader = false;
  bool cancelled = false;
  bool deadline_passed = false;
  bool body_too_large = false;

  static size_t OnWrite(char* data, size_t size, size_t count, void* user) {
    auto* self = static_cast<Attempt*>(user);
    const size_t bytes = size * count;
    if (self->on_line != nullptr && !self->streaming) {
      long code = 0;
      curl_easy_getinfo(self->curl, CURLINFO_RESPONSE_CODE, &code);
      self->streaming = code >= 200 && code < 300;
    }
    if (!self->streaming) {
      if (self->body.size() + bytes > kMaxBodyBytes) {
        self->body_too_large = true;
        return 0;
      }
      self->body.append(data, bytes);
      return bytes;
    }
    std::string_view chunk(data, bytes);
    while (!chunk.empty()) {
      size_t newline = chunk.find('\n');
      if (newline == std::string_view::npos) {
        if (self->partial_line.size() + chunk.size() > kMaxBodyBytes) {
          self->body_too_large = true;
          return 0;
        }
        self->partial_line.append(chunk);
        break;
      }
      self->partial_line.append(chunk.substr(0, newline));
      chunk.remove_prefix(newline + 1);
      std::string line = std::move(self->partial_line);
      self->partial_line.clear();
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty()) continue;
      if (!(*self->on_line)(line)) {
        self->ended_by_reader = true;
        return 0;
      }
    }
    return bytes;
  }

  static size_t OnHeader(char* data, size_t size, size_t count, void* user) {
    auto* self = static_cast<Attempt*>(user);
    const size_t bytes = size * count;
    std::string_view line(data, bytes);
    std::string lower(line.substr(0, std::min<size_t>(line.size(), 12)));
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    if (self->retry_after != nullptr && StartsWith(lower, "retry-after:")) {
      std::string_view value = line.substr(12);
      while (!value.empty() && std::isspace(static_cast<unsigned char>(value.front()))) {
        value.remove_prefix(1);
      }
      while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back()))) {
        value.remove_suffix(1);
      }
      *self->retry_after = std::string(value);
    }
    return bytes;
  }

  // Points `curl` at `url` with this attempt's callbacks, curl's error text
  // into `error_buffer` and the time limits; no redirects, http(s) only.
  void SetTransferOptions(const std::string& url, char* error_buffer,
                          std::chrono::milliseconds timeout,
                          std::chrono::milliseconds connect_timeout) {
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_buffer);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "https,http");
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(connect_timeout.count()));
    curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &Attempt::OnWrite);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, this);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, &Attempt::OnHeader);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, this);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, &Attempt::OnProgress);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, this);
    curl_easy_setopt(curl, CURLOPT_USERAGENT, "certmount/" CERTMOUNT_VERSION);
  }

  // The Status for a transfer that ended with `result` (not CURLE_OK):
  // CANCELLED, DEADLINE_EXCEEDED, INTERNAL for an oversized answer, else
  // UNAVAILABLE naming `server`. `what` is "METHOD path".
  Status Failure(CURLcode result, const char* error_buffer, const std::string& what,
                 const std::string& server) const {
    std::string detail = error_buffer[0] != '\0' ? error_buffer : curl_easy_strerror(result);
    if (cancelled) return Status::Cancelled(what + " cancelled");
    if (deadline_passed || result == CURLE_OPERATION_TIMEDOUT) {
      return Status::DeadlineExceeded(what + " ran out of time: " + detail);
    }
    if (body_too_large) return Status::Internal(what + ": answer larger than 64 MiB");
    return Status::Unavailable("API server " + server + " unreachable (" + what + "): " + detail);
  }

  static int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    auto* self = static_cast<Attempt*>(user);
    if (self->stop.stop_requested()) {
      self->cancelled = true;
      return 1;
    }
    if (self->clock->SteadyNow() >= self->deadline) {
      self->deadline_passed = true;
      return 1;
    }
    return 0;
  }
};

std::string QueryEscape(std::string_view text) {
  GlobalInitOnce();
  char* escaped = curl_easy_escape(nullptr, text.data(), static_cast<int>(text.size()));
  if (escaped == nullptr) return std::string();
  std::string result(escaped);
  curl_free(escaped);
  return result;
}

Result<std::unique_ptr<Client>> Client::Create(KubeConfig config, ClientOptions options) {
  if (!StartsWith(config.server, "https://") && !StartsWith(config.server, "http://")) {
    return Status::InvalidArgument("API server address \"" + config.server +
                                   "\" is not an http(s) URL");
  }
  GlobalInitOnce();
  return std::make_unique<Client>(ConstructionKey<Client>(), std::move(config), options);
}

Client::Client(ConstructionKey<Client>, KubeConfig config, ClientOptions options)
    : config_(std::move(config)),
      options_(options),
      clock_(options.clock != nullptr ? options.clock : &SystemClock::Instance()),
      owned_sleeper_(options.sleeper != nullptr ? nullptr : std::make_unique<ClockSleeper>(clock_)),
      sleeper_(options.sleeper != nullptr ? options.sleeper : owned_sleeper_.get()),
      limiter_(options.qps, options.burst, clock_, sleeper_),
      tokens_(config_.token, config_.token_file, Env::Default()) {}

Client::~Client() = default;

ApiBudget::ApiBudget(ApiBudget&& other) noexcept
    : limiter_(std::exchange(other.limiter_, nullptr)),
      remaining_(std::exchange(other.remaining_, 0)),
      priority_(other.priority_) {}

ApiBudget& ApiBudget::operator=(ApiBudget&& other) noexcept {
  if (this != &other) {
    Release();
    limiter_ = std::exchange(other.limiter_, nullptr);
    remaining_ = std::exchange(other.remaining_, 0);
    priority_ = other.priority_;
  }
  return *this;
}

ApiBudget::~ApiBudget() { Release(); }

void ApiBudget::Release() {
  if (limiter_ != nullptr) limiter_->GiveBack(remaining_);
  limiter_ = nullptr;
  remaining_ = 0;
}

Result<ApiBudget> Client::Reserve(int calls, ApiPriority priority,
                                  std::chrono::steady_clock::time_point deadline,
                                  std::stop_token stop) {
  const int tokens = std::clamp(calls, 0, limiter_.burst());
  CERTMOUNT_RETURN_IF_ERROR(limiter_.Acquire(tokens, priority, deadline, stop));
  return ApiBudget(&limiter_, tokens, priority);
}

Status Client::TakeToken(const Request& request, std::chrono::steady_clock::time_point deadline,
                         std::stop_token stop, ApiBudget* budget) {
  if (budget == nullptr) return limiter_.Acquire(1, request.priority, deadline, stop);
  // Another client's tokens say nothing about this client's limit.
  if (budget->limiter_ == &limiter_ && budget->remaining_ > 0) {
    --budget->remaining_;
    return Status::Ok();
  }
  return limiter_.Acquire(1, budget->priority_, deadline, stop);
}

std::unique_ptr<Client::CurlHandle> Client::TakeHandle() {
  {
    std::lock_guard lock(handles_mutex_);
    if (!idle_handles_.empty()) {
      std::unique_ptr<CurlHandle> handle = std::move(idle_handles_.back());
      idle_handles_.pop_back();
      curl_easy_reset(handle->curl);
      return handle;
    }
  }
  return std::make_unique<CurlHandle>();
}

void Client::ReturnHandle(std::unique_ptr<CurlHandle> handle) {
  std::lock_guard lock(handles_mutex_);
  if (idle_handles_.size() < 8) idle_handles_.push_back(std::move(handle));
}

Result<Response> Client::Send(const Request& request,
                              std::chrono::steady_clock::time_point deadline, std::stop_token stop,
                              const std::function<bool(std::string_view)>* on_line,
                              std::string* retry_after) {
  if (stop.stop_requested()) return Status::Cancelled("cancelled before the API request");
  std::chrono::milliseconds remaining = Remaining(*clock_, deadline);
  if (remaining <= std::chrono::milliseconds::zero()) {
    return Status::DeadlineExceeded("deadline passed before the API request " + request.path);
  }
  std::string token = request.bearer_token;
  if (token.empty()) {
    CERTMOUNT_ASSIGN_OR_RETURN(token, tokens_.Token());
  }

  std::unique_ptr<CurlHandle> handle = TakeHandle();
  if (handle->curl == nullptr) return Status::Internal("curl_easy_init failed");
  CURL* curl = handle->curl;

  Attempt attempt;
  attempt.curl = curl;
  attempt.clock = clock_;
  attempt.deadline = deadline;
  attempt.stop = stop;
  attempt.on_line = on_line;
  attempt.retry_after = retry_after;

  const std::string url = config_.server + request.path;
  char error_buffer[CURL_ERROR_SIZE] = {};
  attempt.SetTransferOptions(url, error_buffer, remaining,
                             std::min(remaining, options_.connect_timeout));
  SetTlsOptions(curl, config_);
  // Must outlive the transfer: curl keeps a pointer to the list.
  SlistPtr headers = SetRequestOptions(curl, request, token);

  CURLcode result = curl_easy_perform(curl);
  long http_status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &http_status);
  // Drop the handle's copy of the header list (it holds the token) before
  // the handle is pooled.
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, nullptr);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, nullptr);
  ReturnHandle(std::move(handle));

  if (result != CURLE_OK && !(result == CURLE_WRITE_ERROR && attempt.ended_by_reader)) {
    return attempt.Failure(result, error_buffer, request.method + " " + request.path,
                           config_.server);
  }
  return Response{http_status, std::move(attempt.body)};
}

Result<Response> Client::Call(const Request& request,
                              std::chrono::steady_clock::time_point deadline, std::stop_token stop,
                              ApiBudget* budget) {
  std::chrono::milliseconds backoff = options_.initial_backoff;
  for (int attempt = 1;; ++attempt) {
    CERTMOUNT_RETURN_IF_ERROR(TakeToken(request, deadline, stop, budget));
    std::string retry_after;
    CERTMOUNT_ASSIGN_OR_RETURN(Response response,
                               Send(request, deadline, stop, nullptr, &retry_after));
    if (response.http_status >= 200 && response.http_status < 300) {
      spdlog::debug("kube {} {}: {}", request.method, request.path, response.http_status);
      return response;
    }
    Status status = StatusFromHttp(response.http_status, response.body);
    if (!IsRetryableHttp(response.http_status) || attempt >= options_.max_attempts) {
      spdlog::debug("kube {} {}: {}", request.method, request.path, status.ToString());
      return status;
    }
    std::chrono::milliseconds wait = backoff;
    int seconds = 0;
    auto [end, error] =
        std::from_chars(retry_after.data(), retry_after.data() + retry_after.size(), seconds);
    if (!retry_after.empty() && error == std::errc() &&
        end == retry_after.data() + retry_after.size() && seconds >= 0) {
      wait = std::chrono::seconds(seconds);
    } else {
      backoff = std::min(backoff * 2, options_.max_backoff);
    }
    auto retry_at = clock_->SteadyNow() + wait;
    if (retry_at >= deadline) {
      return status.WithContext("no time left to retry");
    }
    spdlog::info("kube {} {}: {}; retrying in {} ms (try {} of {})", request.method, request.path,
                 status.ToString(), wait.count(), attempt + 1, options_.max_attempts);
    if (!sleeper_->SleepUntil(retry_at, stop)) {
      return Status::Cancelled(request.method + " " + request.path + " cancelled");
    }
  }
}

Status Client::Stream(const Request& request, std::chrono::steady_clock::time_point deadline,
                      std::stop_token stop, const std::function<bool(std::string_view)>& on_line) {
  CERTMOUNT_RETURN_IF_ERROR(limiter_.Acquire(1, request.priority, deadline, stop));
  CERTMOUNT_ASSIGN_OR_RETURN(Response response, Send(request, deadline, stop, &on_line, nullptr));
  if (response.http_status >= 200 && response.http_status < 300) return Status::Ok();
  return StatusFromHttp(response.http_status, response.body);
}

}  // namespace certmount::kube
