// Runs the real certmountd binary as a child process on a temporary unix
// socket, and talks CSI to it like kubelet.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "csi.grpc.pb.h"

namespace certmount::testing {

struct ProcessResult {
  int exit_code = -1;  // -signal when killed by a signal
  std::string out;
  std::string err;
};

// Runs a program to completion with the given arguments, capturing output.
ProcessResult RunProcess(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& extra_env = {});

class Daemon {
 public:
  // Layout under `root`: csi.sock, data/ (data root), pods/ (target root).
  explicit Daemon(std::string root);
  ~Daemon();  // SIGKILLs a child still running.
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Starts certmountd with the standard flags plus `extra_args` and waits
  // until the socket accepts calls. Returns false (with log()) if it exits.
  bool Start(const std::vector<std::string>& extra_args = {},
             const std::map<std::string, std::string>& extra_env = {});
  // Like Start, but runs the tests' build of certmountd
  // (test/helpers/certmountd_test_hooks.cc): every publish stops forever at
  // `step` (a PublishStepName, e.g. "key-generated") after appending
  // "<step> <volume id>" to `hold_file`, so the test can kill it there.
  bool StartHeldAt(const std::string& step, const std::string& hold_file,
                   const std::vector<std::string>& extra_args = {});
  // SIGTERM, then waits; returns the exit code.
  int Terminate();
  // SIGKILL, then waits.
  void Kill();
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

  // What the process wrote to stderr so far.
  std::string log() const;

  const std::string& socket_path() const { return socket_path_; }
  const std::string& data_root() const { return data_root_; }
  const std::string& target_root() const { return target_root_; }
  std::string endpoint() const { return "unix://" + socket_path_; }

  // A target path for `pod`'s volume, with its parent created as kubelet
  // does before it calls NodePublishVolume.
  std::string PodTarget(const std::string& pod) const;

  csi::v1::Identity::Stub& identity();
  csi::v1::Node::Stub& node();

 private:
  bool StartProgram(const std::string& program, const std::vector<std::string>& extra_args,
                    const std::map<std::string, std::string>& extra_env);

  std::string root_;
  std::string socket_path_;
  std::string data_root_;
  std::string target_root_;
  std::string log_path_;
  pid_t pid_ = -1;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<csi::v1::Identity::Stub> identity_;
  std::unique_ptr<csi::v1::Node::Stub> node_;
};

// A client deadline for one CSI call.
std::unique_ptr<grpc::ClientContext> CallContext(
    std::chrono::milliseconds timeout = std::chrono::seconds(30));

// A NodePublishVolumeRequest as kubelet sends it for an ephemeral inline
// volume: readonly, mount capability, pod info and the ephemeral flag.
// The pod UID KubeletPublishRequest sends (csi.storage.k8s.io/pod.uid).
inline constexpr char kKubeletPodUid[] = "0b5c1c8e-8f5e-4c4e-9d3a-2f9a4f0e6b11";

csi::v1::NodePublishVolumeRequest KubeletPublishRequest(
    const std::string& volume_id, const std::string& target_path,
    const std::map<std::string, std::string>& attributes);

// Whether kubelet takes a NodePublishVolume error as "maybe still going on"
// (its isFinalError is false): the mount is uncertain, and kubelet calls
// NodeUnpublishVolume for it later. Any other error ends the call for good.
bool KubeletSeesUncertain(const grpc::Status& status);

// NodeUnpublishVolume of `volume_id` at `target_path`, as kubelet sends it.
grpc::Status UnpublishVolume(Daemon& daemon, const std::string& volume_id,
                             const std::string& target_path);

}  // namespace certmount::testing
