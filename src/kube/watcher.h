// List-then-watch on one collection, the way client-go's reflector does it:
// list, then watch from the list's resourceVersion, resume from the last
// resourceVersion seen (events and bookmarks) after a dropped connection,
// and list again after 410 Gone.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <stop_token>
#include <string>
#include <string_view>

#include "kube/client.h"

namespace certmount::kube {

struct WatchEvent {
  // "ADDED", "MODIFIED" or "DELETED"; objects from a list come as "ADDED".
  std::string type;
  // The object, JSON text.
  std::string object_json;
};

// Where a list's objects begin and end. A list (the first one, and every
// one after 410 Gone) delivers the whole collection as of its
// resourceVersion, so a consumer keeping a copy drops whatever a list
// between kBegin and kEnd did not deliver.
enum class ListBoundary { kBegin, kEnd };

struct WatcherOptions {
  // Collection path without a query, e.g. "/apis/cert-manager.io/v1/certificaterequests".
  std::string collection_path;
  // labelSelector value; empty for none.
  std::string label_selector;
  // fieldSelector value, e.g. "spec.nodeName=node-1"; empty for none.
  std::string field_selector;
  // The server ends each watch after this long (timeoutSeconds); the watcher
  // then resumes. Bounds how long a half-dead connection can go unnoticed.
  std::chrono::seconds watch_timeout{300};
  // Wait after a failed list or watch, doubling up to max_backoff.
  std::chrono::milliseconds initial_backoff{500};
  std::chrono::milliseconds max_backoff{30000};
};

class Watcher {
 public:
  // `client` must outlive the watcher. `on_event` is called from Run's
  // thread for every object of every list and every ADDED/MODIFIED/DELETED
  // event, in order; it must not block for long. `on_list`, when set, is
  // called the same way around the objects of every list that succeeded.
  Watcher(Client* client, WatcherOptions options, std::function<void(const WatchEvent&)> on_event,
          std::function<void(ListBoundary)> on_list = {});

  // Lists and watches until `stop` is requested; failures are logged and
  // retried with backoff, never returned.
  void Run(std::stop_token stop);

  // Lists the server answered, counted before their objects are delivered,
  // for tests and logs.
  int lists() const { return lists_.load(); }

 private:
  // One list; sets resource_version_. Delivers the items.
  Status List(std::stop_token stop);
  // "labelSelector=...&fieldSelector=..." for the options' selectors ("" for none).
  std::string SelectorQuery() const;
  // One watch connection from resource_version_.
  Status WatchOnce(std::stop_token stop, bool* saw_event);

  Client* client_;
  const WatcherOptions options_;
  std::function<void(const WatchEvent&)> on_event_;
  std::function<void(ListBoundary)> on_list_;
  std::string resource_version_;
  std::atomic<int> lists_{0};
};

}  // namespace certmount::kube
