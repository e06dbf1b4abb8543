// I/O errors at each filesystem step of a publish, injected through the Env
// seam into a real Publisher on a real store, tmpfs and bind mounts: the
// publish fails with a code kubelet reads correctly and leaves no row, no
// files and no mount; the next attempt succeeds.
#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>

#include "common/clock.h"
#include "issue/local_ca.h"
#include "state/store.h"
#include "support/fault_env.h"
#include "support/mounts.h"
#include "support/root.h"
#include "support/temp_dir.h"
#include "volume/publisher.h"

namespace certmount::testing {
namespace {

namespace fs = std::filesystem;

struct Fault {
  const char* name;
  const char* operation;
  int nth;
  int error_number;
  Code expected;
};

class PublishFaultTest : public ::testing::TestWithParam<Fault> {};

TEST_P(PublishFaultTest, FailedStepLeavesNothingAndTheRetrySucceeds) {
  CERTMOUNT_REQUIRE_ROOT();
  TempDir dir;
  PublisherOptions options;
  options.data_root = dir.Sub("data");
  options.target_root = dir.Sub("pods");
  fs::create_directories(options.data_root);
  const std::string parent = options.target_root + "/pod/volumes/kubernetes.io~csi/tls";
  fs::create_directories(parent);
  const std::string target = parent + "/mount";

  auto store = Store::Open(options.data_root + "/state.db", SystemClock::Instance());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto ca = LocalCa::LoadOrCreate(options.data_root + "/ca", SystemClock::Instance());
  ASSERT_TRUE(ca.ok()) << ca.status().ToString();
  FaultInjectionEnv env;
  Publisher publisher(options, store->get(), ca->get(), &env, &SystemClock::Instance());
  ASSERT_TRUE(publisher.Startup().ok());

  PublishRequest request;
  request.volume_id = "csi-fault";
  request.target_path = target;
  request.volume_context = {{"csi.storage.k8s.io/ephemeral", "true"},
                            {"csi.storage.k8s.io/pod.name", "p"},
                            {"csi.storage.k8s.io/pod.namespace", "ns"},
                            {"csi.cert-manager.io/issuer-name", "local"},
                            {"csi.cert-manager.io/common-name", "fault"},
                            {"csi.cert-manager.io/pkcs12-enable", "true"},
                            {"csi.cert-manager.io/pkcs12-password", "pw"}};

  const Fault fault = GetParam();
  env.FailNth(fault.operation, fault.nth, fault.error_number);
  Status failed = publisher.Publish(request);
  ASSERT_FALSE(failed.ok()) << fault.operation;
  EXPECT_EQ(failed.code(), fault.expected) << failed.ToString();
  EXPECT_NE(failed.message().find("injected"), std::string::npos) << failed.ToString();

  Result<std::vector<VolumeRecord>> rows = (*store)->ListVolumes();
  ASSERT_TRUE(rows.ok());
  EXPECT_TRUE(rows->empty());
  EXPECT_FALSE(IsMountPoint(target));
  EXPECT_FALSE(fs::exists(target));
  EXPECT_TRUE(fs::is_empty(options.data_root + "/volumes"));

  Status retried = publisher.Publish(request);
  ASSERT_TRUE(retried.ok()) << retried.ToString();
  EXPECT_TRUE(IsMountPoint(target));
  EXPECT_TRUE(fs::exists(target + "/tls.crt"));
  ASSERT_TRUE(publisher.Unpublish(request.volume_id, target).ok());
}

INSTANTIATE_TEST_SUITE_P(
    EveryFilesystemStep, PublishFaultTest,
    ::testing::Values(
        Fault{"FirstDirectory", "CreateDir", 1, EACCES, Code::kInternal},
        Fault{"SecretsFileFull", "WriteNewFile", 1, ENOSPC, Code::kResourceExhausted},
        Fault{"KeyFileFull", "WriteNewFile", 3, ENOSPC, Code::kResourceExhausted},
        Fault{"KeystoreFileFull", "WriteNewFile", 5, ENOSPC, Code::kResourceExhausted},
        Fault{"DirectorySync", "SyncDir", 1, EIO, Code::kInternal},
        Fault{"DataSwap", "Rename", 2, EIO, Code::kInternal},
        Fault{"NameLink", "Symlink", 2, ENOSPC, Code::kResourceExhausted},
        Fault{"BindMount", "Mount", 1, EPERM, Code::kInternal},
        // The read-only remount: a failure must not leave a writable mount.
        Fault{"ReadOnlyRemount", "Mount", 2, EPERM, Code::kInternal}),
    [](const ::testing::TestParamInfo<Fault>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace certmount::testing
