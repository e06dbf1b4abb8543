// The node's pod watch as certmountd runs it (src/node/node.cc): a
// kube::Watcher on the fake API server's pods of one node, feeding a
// kube::PodCache, for tests that hand the cache to an issuer.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "kube/client.h"
#include "kube/pod_cache.h"
#include "kube/watcher.h"
#include "support/fake_kube_api.h"

namespace certmount::testing {

class PodWatch {
 public:
  // Starts watching `api`'s pods on `node`; stops on destruction.
  explicit PodWatch(FakeKubeApi& api, const std::string& node = "test-node");
  ~PodWatch();
  PodWatch(const PodWatch&) = delete;
  PodWatch& operator=(const PodWatch&) = delete;

  const kube::PodCache& cache() const { return cache_; }
  // Waits (bounded, on the fake's changes) until the first list is in.
  bool WaitSynced();
  // Waits (bounded, on the fake's changes) until the cache says `expected`
  // about `pod`.
  bool WaitFor(const kube::PodRef& pod, kube::PodLiveness expected);

 private:
  FakeKubeApi& api_;
  kube::PodCache cache_;
  std::unique_ptr<kube::Client> client_;
  std::unique_ptr<kube::Watcher> watcher_;
  std::jthread thread_;
};

}  // namespace certmount::testing
