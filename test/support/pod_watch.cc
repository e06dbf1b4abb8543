#include "support/pod_watch.h"

#include <stdexcept>

namespace certmount::testing {

PodWatch::PodWatch(FakeKubeApi& api, const std::string& node) : api_(api) {
  kube::KubeConfig config;
  config.server = api.url();
  config.ca_pem = api.server_ca_pem();
  config.token = FakeKubeApi::kToken;
  kube::ClientOptions options;
  options.initial_backoff = std::chrono::milliseconds(10);
  Result<std::unique_ptr<kube::Client>> client = kube::Client::Create(config, options);
  if (!client.ok()) throw std::runtime_error(client.status().ToString());
  client_ = std::move(*client);
  kube::WatcherOptions watch;
  watch.collection_path = "/api/v1/pods";
  watch.field_selector = "spec.nodeName=" + node;
  watch.initial_backoff = std::chrono::milliseconds(10);
  watcher_ = std::make_unique<kube::Watcher>(
      client_.get(), watch, [this](const kube::WatchEvent& event) { cache_.OnEvent(event); },
      [this](kube::ListBoundary boundary) { cache_.OnListBoundary(boundary); });
  thread_ = std::jthread([this](std::stop_token stop) { watcher_->Run(std::move(stop)); });
}

PodWatch::~PodWatch() {
  thread_.request_stop();
  if (thread_.joinable()) thread_.join();
}

bool PodWatch::WaitSynced() {
  return api_.WaitUntil([&] { return cache_.synced(); });
}

bool PodWatch::WaitFor(const kube::PodRef& pod, kube::PodLiveness expected) {
  return api_.WaitUntil([&] { return cache_.Liveness(pod) == expected; });
}

}  // namespace certmount::testing
