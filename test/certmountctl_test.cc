// certmountctl against the real certmountd: a pod spec written for
// cert-manager's csi-driver, replayed as kubelet would, gets a valid
// certificate with the requested properties on a read-only mount.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "support/daemon.h"
#include "support/root.h"
#include "support/temp_dir.h"
#include "support/x509_inspect.h"

namespace certmount::testing {
namespace {

namespace fs = std::filesystem;

const std::string kPodUid = "5c9d1a3e-2b7f-4e61-9a0c-8d4f2e6b7a10";

TEST(CertmountctlTest, ReplayedCsiDriverPodGetsTheCertificateItAskedFor) {
  CERTMOUNT_REQUIRE_ROOT();
  TempDir dir;
  Daemon daemon(dir.path().string());
  ASSERT_TRUE(daemon.Start()) << daemon.log();
  const std::string manifest = CERTMOUNT_SOURCE_DIR "/test/data/csi-driver-pod.yaml";

  ProcessResult info = RunProcess({CERTMOUNTCTL_PATH, "--endpoint=" + daemon.endpoint(), "info"});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.out.find("csi.certmount.io"), std::string::npos);
  EXPECT_NE(info.out.find("node id:      test-node"), std::string::npos) << info.out;

  ProcessResult published = RunProcess({CERTMOUNTCTL_PATH, "--endpoint=" + daemon.endpoint(), "pod",
                                        manifest, "--target-root=" + daemon.target_root()});
  ASSERT_EQ(published.exit_code, 0) << published.err << daemon.log();

  const std::string target =
      daemon.target_root() + "/" + kPodUid + "/volumes/kubernetes.io~csi/tls/mount";
  ASSERT_TRUE(fs::exists(target + "/tls.crt")) << published.out;
  EXPECT_EQ(VerifyChain(target + "/tls.crt", target + "/ca.crt"), "");
  EXPECT_TRUE(KeyMatchesCertificate(target + "/tls.key", target + "/tls.crt"));
  EXPECT_EQ(PemLabel(target + "/tls.key"), "PRIVATE KEY");  // key-encoding PKCS8
  InspectedCertificate cert = InspectCertificateFile(target + "/tls.crt");
  EXPECT_EQ(cert.subject, "CN=payments.sandbox");
  EXPECT_EQ(cert.dns_names,
            (std::vector<std::string>{"my-csi-app.sandbox.svc.cluster.local", "localhost"}));
  EXPECT_EQ(
      cert.uris,
      (std::vector<std::string>{"spiffe://cluster.local/ns/sandbox/pod/my-csi-app/" + kPodUid}));
  EXPECT_EQ(cert.ip_addresses, (std::vector<std::string>{"127.0.0.1"}));
  EXPECT_EQ(cert.extended_key_usages, (std::vector<std::string>{"serverAuth", "clientAuth"}));
  EXPECT_EQ(cert.not_after - cert.not_before, 3600);
  // fsGroup 2000 reached the files through volume_mount_group.
  struct stat st {};
  ASSERT_EQ(stat((target + "/tls.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, 2000u);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  // Read-only for the pod.
  std::ofstream(target + "/x") << "x";
  EXPECT_FALSE(fs::exists(target + "/x"));

  ProcessResult unpublished =
      RunProcess({CERTMOUNTCTL_PATH, "--endpoint=" + daemon.endpoint(), "pod", manifest,
                  "--target-root=" + daemon.target_root(), "--unpublish"});
  ASSERT_EQ(unpublished.exit_code, 0) << unpublished.err;
  EXPECT_FALSE(fs::exists(target));
  EXPECT_TRUE(fs::is_empty(daemon.data_root() + "/volumes"));
}

TEST(CertmountctlTest, ReportsFailuresWithTheDriversCode) {
  CERTMOUNT_REQUIRE_ROOT();
  TempDir dir;
  Daemon daemon(dir.path().string());
  ASSERT_TRUE(daemon.Start()) << daemon.log();
  fs::create_directories(daemon.target_root() + "/p");
  ProcessResult r = RunProcess(
      {CERTMOUNTCTL_PATH, "--endpoint=" + daemon.endpoint(), "publish", "--volume-id=csi-1",
       "--target-path=" + daemon.target_root() + "/p/m", "-a", "csi.cert-manager.io/issuer-name=x",
       "-a", "csi.cert-manager.io/common-name=x", "-a", "csi.cert-manager.io/duration=forever"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("csi.cert-manager.io/duration"), std::string::npos) << r.err;
  ProcessResult bad = RunProcess({CERTMOUNTCTL_PATH, "--bogus"});
  EXPECT_EQ(bad.exit_code, 2);
}

}  // namespace
}  // namespace certmount::testing
