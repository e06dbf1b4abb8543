#include "kube/watcher.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "kube/http_status.h"

namespace certmount::kube {
namespace {

constexpr std::chrono::seconds kListTimeout{60};

std::string ResourceVersionOf(const nlohmann::json& object) {
  const auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return "";
  return metadata->value("resourceVersion", "");
}

}  // namespace

Watcher::Watcher(Client* client, WatcherOptions options,
                 std::function<void(const WatchEvent&)> on_event,
                 std::function<void(ListBoundary)> on_list)
    : client_(client),
      options_(std::move(options)),
      on_event_(std::move(on_event)),
      on_list_(std::move(on_list)) {}

std::string Watcher::SelectorQuery() const {
  // Appends only: GCC 12's -Wrestrict misfires on "literal" + std::string
  // in a Release build.
  std::string query;
  auto add = [&query](std::string_view name, const std::string& value) {
    if (value.empty()) return;
    if (!query.empty()) query.append("&");
    query.append(name).append("=").append(QueryEscape(value));
  };
  add("labelSelector", options_.label_selector);
  add("fieldSelector", options_.field_selector);
  return query;
}

Status Watcher::List(std::stop_token stop) {
  std::string path = options_.collection_path;
  if (std::string query = SelectorQuery(); !query.empty()) path.append("?").append(query);
  auto deadline = client_->clock().SteadyNow() + kListTimeout;
  // kWatch: publishes and renewals wait on what lists and watches see, so
  // these never queue behind them for rate-limit tokens.
  CERTMOUNT_ASSIGN_OR_RETURN(
      Response response, client_->Call({"GET", path, "", "", ApiPriority::kWatch}, deadline, stop));
  nlohmann::json list = nlohmann::json::parse(response.body, nullptr, false);
  if (!list.is_object()) return Status::Internal("list " + path + " is not a JSON object");
  resource_version_ = ResourceVersionOf(list);
  // Counted before delivery: a reader woken by one of these objects must
  // already see this list counted.
  ++lists_;
  auto items = list.find("items");
  if (on_list_) on_list_(ListBoundary::kBegin);
  if (items != list.end() && items->is_array()) {
    for (const nlohmann::json& item : *items) on_event_({"ADDED", item.dump()});
  }
  if (on_list_) on_list_(ListBoundary::kEnd);
  return Status::Ok();
}

Status Watcher::WatchOnce(std::stop_token stop, bool* saw_event) {
  std::string path = options_.collection_path + "?watch=1&allowWatchBookmarks=true";
  if (std::string query = SelectorQuery(); !query.empty()) path.append("&").append(query);
  path += "&resourceVersion=" + QueryEscape(resource_version_);
  path += "&timeoutSeconds=" + std::to_string(options_.watch_timeout.count());
  // A little longer than the server's own timeout, so the server ends it.
  auto deadline = client_->clock().SteadyNow() + options_.watch_timeout + std::chrono::seconds(30);
  Status stream_error;
  Status status = client_->Stream(
      {"GET", path, "", "", ApiPriority::kWatch}, deadline, stop, [&](std::string_view line) {
        nlohmann::json event = nlohmann::json::parse(line, nullptr, false);
        if (!event.is_object() || !event.contains("object") || !event["object"].is_object()) {
          stream_error = Status::Internal("malformed watch event");
          return false;
        }
        const std::string type = event.value("type", "");
        const nlohmann::json& object = event["object"];
        if (type == "ERROR") {
          long code = object.value("code", 0L);
          stream_error = StatusFromHttp(code, object.dump());
          return false;
        }
        *saw_event = true;
        std::string version = ResourceVersionOf(object);
        if (!version.empty()) resource_version_ = version;
        if (type == "BOOKMARK") return true;
        if (type == "ADDED" || type == "MODIFIED" || type == "DELETED") {
          on_event_({type, object.dump()});
        }
        return true;
      });
  if (!stream_error.ok()) return stream_error;
  // The server (or our own deadline) ending the stream is the normal way a
  // watch ends; resume from where it stopped.
  if (status.code() == Code::kDeadlineExceeded && !stop.stop_requested()) return Status::Ok();
  return status;
}

void Watcher::Run(std::stop_token stop) {
  std::chrono::milliseconds backoff = options_.initial_backoff;
  auto back_off = [&] {
    client_->sleeper().SleepUntil(client_->clock().SteadyNow() + backoff, stop);
    backoff = std::min(backoff * 2, options_.max_backoff);
  };
  while (!stop.stop_requested()) {
    if (resource_version_.empty()) {
      Status listed = List(stop);
      if (!listed.ok()) {
        if (stop.stop_requested()) return;
        spdlog::warn("listing {} failed: {}", options_.collection_path, listed.ToString());
        back_off();
        continue;
      }
    }
    bool saw_event = false;
    Status watched = WatchOnce(stop, &saw_event);
    if (stop.stop_requested()) return;
    if (IsGone(watched)) {
      spdlog::info("watch on {} expired ({}); listing again", options_.collection_path,
                   watched.message());
      resource_version_.clear();
      continue;
    }
    if (!watched.ok()) {
      spdlog::warn("watch on {} failed: {}", options_.collection_path, watched.ToString());
      back_off();
      continue;
    }
    if (saw_event) {
      backoff = options_.initial_backoff;
    } else {
      // A connection that ends without delivering anything must not spin.
      back_off();
    }
  }
}

}  // namespace certmount::kube
