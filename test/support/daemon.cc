#include "support/daemon.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace certmount::testing {

namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// fork + exec with stdout/stderr redirected to files; returns the pid.
// Everything that allocates happens before fork: the caller has other
// threads (gRPC's), and a child that called malloc, setenv or grew a vector
// while one of them held the allocator's lock would hang before exec (the
// crash torture's "did not start within 30 s, no log line").
pid_t Spawn(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
            const std::string& out_path, const std::string& err_path) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_entries;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    if (env.count(entry.substr(0, entry.find('='))) == 0) env_entries.push_back(entry);
  }
  for (const auto& [key, value] : env) env_entries.push_back(key + "=" + value);
  std::vector<char*> envp;
  for (std::string& e : env_entries) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = fork();
  if (pid != 0) return pid;
  // Only async-signal-safe calls from here on.
  int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  int null_in = open("/dev/null", O_RDONLY);
  dup2(null_in, 0);
  dup2(out, 1);
  dup2(err, 2);
  execve(args[0], args.data(), envp.data());
  _exit(127);
}

int WaitExit(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return -WTERMSIG(status);
  return -1;
}

bool SocketAccepts(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

}  // namespace

ProcessResult RunProcess(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& extra_env) {
  char dir_template[] = "/tmp/certmount-proc-XXXXXX";
  std::string dir = mkdtemp(dir_template);
  pid_t pid = Spawn(argv, extra_env, dir + "/out", dir + "/err");
  ProcessResult result;
  result.exit_code = WaitExit(pid);
  result.out = ReadFile(dir + "/out");
  result.err = ReadFile(dir + "/err");
  std::filesystem::remove_all(dir);
  return result;
}

Daemon::Daemon(std::string root)
    : root_(std::move(root)),
      socket_path_(root_ + "/csi.sock"),
      data_root_(root_ + "/data"),
      target_root_(root_ + "/pods"),
      log_path_(root_ + "/certmountd.log") {
  std::filesystem::create_directories(target_root_);
}

Daemon::~Daemon() {
  if (pid_ > 0) Kill();
}

bool Daemon::Start(const std::vector<std::string>& extra_args,
                   const std::map<std::string, std::string>& extra_env) {
  return StartProgram(CERTMOUNTD_PATH, extra_args, extra_env);
}

bool Daemon::StartHeldAt(const std::string& step, const std::string& hold_file,
                         const std::vector<std::string>& extra_args) {
  return StartProgram(CERTMOUNTD_TEST_HOOKS_PATH, extra_args,
                      {{"CERTMOUNT_TEST_HOLD_AT", step}, {"CERTMOUNT_TEST_HOLD_FILE", hold_file}});
}

bool Daemon::StartProgram(const std::string& program, const std::vector<std::string>& extra_args,
                          const std::map<std::string, std::string>& extra_env) {
  std::vector<std::string> argv = {program,
                                   "--endpoint=" + endpoint(),
                                   "--node-id=test-node",
                                   "--data-root=" + data_root_,
                                   "--target-root=" + target_root_,
                                   "--log-level=debug"};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  pid_ = Spawn(argv, extra_env, root_ + "/certmountd.out", log_path_);
  // Waits for an event (the socket accepting), bounded; not a timed assertion.
  for (int i = 0; i < 600; ++i) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return false;
    }
    if (SocketAccepts(socket_path_)) {
      channel_ = grpc::CreateChannel(endpoint(), grpc::InsecureChannelCredentials());
      identity_ = csi::v1::Identity::NewStub(channel_);
      node_ = csi::v1::Node::NewStub(channel_);
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

int Daemon::Terminate() {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  int code = WaitExit(pid_);
  pid_ = -1;
  return code;
}

void Daemon::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  WaitExit(pid_);
  pid_ = -1;
}

std::string Daemon::log() const { return ReadFile(log_path_); }

std::string Daemon::PodTarget(const std::string& pod) const {
  const std::string parent = target_root_ + "/" + pod + "/volumes/kubernetes.io~csi/tls";
  std::filesystem::create_directories(parent);
  return parent + "/mount";
}

csi::v1::Identity::Stub& Daemon::identity() { return *identity_; }
csi::v1::Node::Stub& Daemon::node() { return *node_; }

std::unique_ptr<grpc::ClientContext> CallContext(std::chrono::milliseconds timeout) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + timeout);
  return context;
}

csi::v1::NodePublishVolumeRequest KubeletPublishRequest(
    const std::string& volume_id, const std::string& target_path,
    const std::map<std::string, std::string>& attributes) {
  csi::v1::NodePublishVolumeRequest request;
  request.set_volume_id(volume_id);
  request.set_target_path(target_path);
  request.set_readonly(true);
  auto* capability = request.mutable_volume_capability();
  capability->mutable_mount();
  capability->mutable_access_mode()->set_mode(
      csi::v1::VolumeCapability::AccessMode::SINGLE_NODE_WRITER);
  auto& context = *request.mutable_volume_context();
  context["csi.storage.k8s.io/ephemeral"] = "true";
  context["csi.storage.k8s.io/pod.name"] = "web-0";
  context["csi.storage.k8s.io/pod.namespace"] = "default";
  context["csi.storage.k8s.io/pod.uid"] = kKubeletPodUid;
  context["csi.storage.k8s.io/serviceAccount.name"] = "web";
  for (const auto& [key, value] : attributes) context[key] = value;
  return request;
}

bool KubeletSeesUncertain(const grpc::Status& status) {
  switch (status.error_code()) {
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
    case grpc::StatusCode::ABORTED:
      return true;
    default:
      return false;
  }
}

grpc::Status UnpublishVolume(Daemon& daemon, const std::string& volume_id,
                             const std::string& target_path) {
  csi::v1::NodeUnpublishVolumeRequest request;
  request.set_volume_id(volume_id);
  request.set_target_path(target_path);
  csi::v1::NodeUnpublishVolumeResponse response;
  return daemon.node().NodeUnpublishVolume(CallContext().get(), request, &response);
}

}  // namespace certmount::testing
