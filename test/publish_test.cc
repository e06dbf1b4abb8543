// NodePublishVolume's success and failure paths through the real certmountd
// over its socket, as root, with real mounts and OpenSSL verification.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/x509v3.h>

#include <SQLiteCpp/SQLiteCpp.h>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/daemon.h"
#include "support/mounts.h"
#include "support/root.h"
#include "support/temp_dir.h"
#include "support/x509_inspect.h"

namespace certmount::testing {
namespace {

namespace fs = std::filesystem;
constexpr char kPrefix[] = "csi.cert-manager.io/";

std::map<std::string, std::string> Attrs(
    std::initializer_list<std::pair<const std::string, std::string>> extra) {
  std::map<std::string, std::string> out = {{std::string(kPrefix) + "issuer-name", "local"}};
  for (const auto& [k, v] : extra) out[std::string(kPrefix) + k] = v;
  return out;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class PublishTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CERTMOUNT_REQUIRE_ROOT();
    daemon_ = std::make_unique<Daemon>(dir_.path().string());
    ASSERT_TRUE(daemon_->Start()) << daemon_->log();
  }

  std::string Target(const std::string& pod) { return daemon_->PodTarget(pod); }

  grpc::Status Publish(const std::string& volume_id, const std::string& target,
                       const std::map<std::string, std::string>& attributes,
                       const std::string& volume_mount_group = "") {
    csi::v1::NodePublishVolumeRequest request =
        KubeletPublishRequest(volume_id, target, attributes);
    request.mutable_volume_capability()->mutable_mount()->set_volume_mount_group(
        volume_mount_group);
    csi::v1::NodePublishVolumeResponse response;
    return daemon_->node().NodePublishVolume(CallContext().get(), request, &response);
  }

  grpc::Status Unpublish(const std::string& volume_id, const std::string& target) {
    return UnpublishVolume(*daemon_, volume_id, target);
  }

  // Reads node state as an admin's sqlite3 shell would, read-only.
  int RowCount(const std::string& where = "1") {
    SQLite::Database db(daemon_->data_root() + "/state.db", SQLite::OPEN_READONLY);
    return db.execAndGet("SELECT count(*) FROM volumes WHERE " + where).getInt();
  }

  std::string VolumeDir(const std::string& id) { return daemon_->data_root() + "/volumes/" + id; }

  TempDir dir_;
  std::unique_ptr<Daemon> daemon_;
};

TEST_F(PublishTest, IssuesVerifiableCertificateOnReadOnlyMount) {
  const std::string target = Target("pod-a");
  grpc::Status status = Publish(
      "csi-a", target,
      Attrs({{"dns-names", "${POD_NAME}.${POD_NAMESPACE}.svc,example.com"},
             {"ip-sans", "10.0.0.7,2001:db8::1"},
             {"uri-sans", "spiffe://cluster.local/ns/${POD_NAMESPACE}/sa/${SERVICE_ACCOUNT_NAME}"},
             {"common-name", "${POD_NAME}"},
             {"key-usages", "digital signature,key encipherment,server auth,client auth"},
             {"duration", "48h"}}));
  ASSERT_TRUE(status.ok()) << status.error_message() << "\n" << daemon_->log();

  ASSERT_TRUE(IsMountPoint(target));
  for (const char* name : {"tls.crt", "tls.key", "ca.crt"}) {
    EXPECT_TRUE(fs::exists(target + "/" + name)) << name;
  }
  // The pod's view is read-only.
  std::ofstream(target + "/intruder") << "x";
  EXPECT_FALSE(fs::exists(target + "/intruder"));
  errno = 0;
  FILE* f = fopen((target + "/tls.crt").c_str(), "w");
  EXPECT_EQ(f, nullptr);
  EXPECT_EQ(errno, EROFS);

  EXPECT_EQ(VerifyChain(target + "/tls.crt", target + "/ca.crt"), "");
  EXPECT_TRUE(KeyMatchesCertificate(target + "/tls.key", target + "/tls.crt"));
  InspectedCertificate cert = InspectCertificateFile(target + "/tls.crt");
  ASSERT_TRUE(cert.parsed);
  EXPECT_EQ(cert.subject, "CN=web-0");
  EXPECT_EQ(cert.dns_names, (std::vector<std::string>{"web-0.default.svc", "example.com"}));
  EXPECT_EQ(cert.ip_addresses, (std::vector<std::string>{"10.0.0.7", "2001:DB8:0:0:0:0:0:1"}));
  EXPECT_EQ(cert.uris, (std::vector<std::string>{"spiffe://cluster.local/ns/default/sa/web"}));
  EXPECT_EQ(cert.extended_key_usages, (std::vector<std::string>{"serverAuth", "clientAuth"}));
  EXPECT_TRUE(cert.key_usage_bits & KU_DIGITAL_SIGNATURE);
  EXPECT_TRUE(cert.key_usage_bits & KU_KEY_ENCIPHERMENT);
  EXPECT_FALSE(cert.is_ca);
  EXPECT_EQ(cert.not_after - cert.not_before, 48 * 3600);
  // A random serial of up to 128 bits: never more, and (with overwhelming
  // probability) far more than a counter would have.
  const std::string serial_digits = cert.serial_hex.substr(cert.serial_hex.find_first_not_of('0'));
  EXPECT_LE(serial_digits.size(), 32u);
  EXPECT_GE(serial_digits.size(), 20u);

  // Recorded as mounted with the certificate's fields, in the same row.
  SQLite::Database db(daemon_->data_root() + "/state.db", SQLite::OPEN_READONLY);
  SQLite::Statement row(
      db,
      "SELECT mounted, serial, not_after, next_issuance_at, pod_name, pod_namespace,"
      " target_path FROM volumes WHERE volume_id = 'csi-a'");
  ASSERT_TRUE(row.executeStep());
  EXPECT_EQ(row.getColumn(0).getInt(), 1);
  EXPECT_EQ(row.getColumn(2).getInt64(), cert.not_after);
  EXPECT_EQ(row.getColumn(3).getInt64(),
            cert.not_before + (cert.not_after - cert.not_before) * 2 / 3);
  EXPECT_EQ(row.getColumn(4).getString(), "web-0");
  EXPECT_EQ(row.getColumn(5).getString(), "default");
  EXPECT_EQ(row.getColumn(6).getString(), target);
  // The serial in the database names the same certificate (hex, any case,
  // in whole bytes as `openssl x509 -serial` prints it, so a leading zero
  // digit appears when the top byte is below 0x10).
  std::string serial = row.getColumn(1).getString();
  for (char& c : serial) c = static_cast<char>(toupper(c));
  EXPECT_EQ(serial.size() % 2, 0u) << serial;
  EXPECT_EQ(serial.substr(serial.find_first_not_of('0')), serial_digits);
  // No private key material in the database file.
  const std::string key_pem = ReadAll(target + "/tls.key");
  const std::string db_bytes =
      ReadAll(daemon_->data_root() + "/state.db") + ReadAll(daemon_->data_root() + "/state.db-wal");
  EXPECT_EQ(db_bytes.find("PRIVATE KEY"), std::string::npos);
}

TEST_F(PublishTest, KeyAlgorithmsSizesAndEncodings) {
  struct Case {
    std::map<std::string, std::string> attrs;
    std::string type;
    int bits;
    std::string label;
  } cases[] = {
      // csi-driver's defaults: RSA 2048 PKCS#1; ECDSA P-256 and Ed25519 PKCS#8.
      {{}, "RSA", 2048, "RSA PRIVATE KEY"},
      {{{"key-algorithm", "ecdsa"}}, "EC", 256, "PRIVATE KEY"},
      {{{"key-algorithm", "ECDSA"}, {"key-size", "384"}}, "EC", 384, "PRIVATE KEY"},
      {{{"key-algorithm", "ECDSA"}, {"key-size", "521"}, {"key-encoding", "pkcs8"}},
       "EC",
       521,
       "PRIVATE KEY"},
      {{{"key-algorithm", "RSA"}, {"key-size", "2048"}}, "RSA", 2048, "RSA PRIVATE KEY"},
      {{{"key-algorithm", "RSA"}, {"key-size", "3072"}, {"key-encoding", "PKCS8"}},
       "RSA",
       3072,
       "PRIVATE KEY"},
      {{{"key-algorithm", "Ed25519"}}, "ED25519", 256, "PRIVATE KEY"},
  };
  int n = 0;
  for (const Case& c : cases) {
    std::map<std::string, std::string> attrs = Attrs({{"common-name", "k"}});
    for (const auto& [k, v] : c.attrs) attrs[std::string(kPrefix) + k] = v;
    const std::string id = "csi-key-" + std::to_string(n);
    const std::string target = Target("pod-key-" + std::to_string(n++));
    grpc::Status status = Publish(id, target, attrs);
    ASSERT_TRUE(status.ok()) << c.type << c.bits << ": " << status.error_message();
    InspectedCertificate cert = InspectCertificateFile(target + "/tls.crt");
    EXPECT_EQ(cert.public_key_type, c.type);
    EXPECT_EQ(cert.public_key_bits, c.bits);
    EXPECT_EQ(PemLabel(target + "/tls.key"), c.label);
    EXPECT_TRUE(KeyMatchesCertificate(target + "/tls.key", target + "/tls.crt"));
    EXPECT_EQ(VerifyChain(target + "/tls.crt", target + "/ca.crt"), "");
  }
}

TEST_F(PublishTest, RepeatPublishIsOkWithoutReissueAndOtherTargetIsAlreadyExists) {
  const std::string target = Target("pod-r");
  ASSERT_TRUE(Publish("csi-r", target, Attrs({{"common-name", "r"}})).ok());
  const std::string first = ReadAll(target + "/tls.crt");
  grpc::Status again = Publish("csi-r", target, Attrs({{"common-name", "r"}}));
  EXPECT_TRUE(again.ok()) << again.error_message();
  EXPECT_EQ(ReadAll(target + "/tls.crt"), first);
  EXPECT_TRUE(IsMountPoint(target));

  grpc::Status elsewhere = Publish("csi-r", Target("pod-other"), Attrs({{"common-name", "r"}}));
  EXPECT_EQ(elsewhere.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_TRUE(IsMountPoint(target));
  EXPECT_EQ(ReadAll(target + "/tls.crt"), first);
}

TEST_F(PublishTest, UnpublishRemovesEverythingAndIsIdempotent) {
  const std::string target = Target("pod-u");
  ASSERT_TRUE(Publish("csi-u", target, Attrs({{"common-name", "u"}})).ok());
  ASSERT_TRUE(fs::exists(VolumeDir("csi-u")));
  grpc::Status status = Unpublish("csi-u", target);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_FALSE(IsMountPoint(target));
  EXPECT_FALSE(fs::exists(target));
  EXPECT_FALSE(fs::exists(VolumeDir("csi-u")));
  EXPECT_EQ(RowCount(), 0);
  EXPECT_TRUE(Unpublish("csi-u", target).ok());
}

TEST_F(PublishTest, FilesFollowFsGroupAndVolumeMountGroup) {
  const std::string a = Target("pod-g1");
  ASSERT_TRUE(Publish("csi-g1", a, Attrs({{"common-name", "g"}}), "2345").ok());
  struct stat st {};
  ASSERT_EQ(stat((a + "/tls.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, 2345u);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  ASSERT_EQ(stat((a + "/tls.crt").c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, 2345u);

  // fs-group wins over kubelet's volume_mount_group.
  const std::string b = Target("pod-g2");
  ASSERT_TRUE(
      Publish("csi-g2", b, Attrs({{"common-name", "g"}, {"fs-group", "3456"}}), "2345").ok());
  ASSERT_EQ(stat((b + "/tls.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, 3456u);

  // Without a group the key is readable by its owner only.
  const std::string c = Target("pod-g3");
  ASSERT_TRUE(Publish("csi-g3", c, Attrs({{"common-name", "g"}})).ok());
  ASSERT_EQ(stat((c + "/tls.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

TEST_F(PublishTest, Pkcs12OpensWithItsPasswordAndCustomFileNames) {
  const std::string target = Target("pod-p");
  grpc::Status status = Publish("csi-p", target,
                                Attrs({{"common-name", "p"},
                                       {"pkcs12-enable", "true"},
                                       {"pkcs12-filename", "store.p12"},
                                       {"pkcs12-password", "s3cret"},
                                       {"certificate-file", "cert.pem"},
                                       {"privatekey-file", "key.pem"},
                                       {"ca-file", "root.pem"}}));
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(OpensPkcs12(target + "/store.p12", "s3cret"));
  EXPECT_FALSE(OpensPkcs12(target + "/store.p12", "wrong"));
  EXPECT_EQ(VerifyChain(target + "/cert.pem", target + "/root.pem"), "");
  EXPECT_TRUE(KeyMatchesCertificate(target + "/key.pem", target + "/cert.pem"));
  EXPECT_FALSE(fs::exists(target + "/tls.crt"));
  // The password is a secret: it is not kept in the database.
  EXPECT_EQ(ReadAll(daemon_->data_root() + "/state.db-wal").find("s3cret"), std::string::npos);
  EXPECT_EQ(ReadAll(daemon_->data_root() + "/state.db").find("s3cret"), std::string::npos);
}

TEST_F(PublishTest, ServiceAccountTokensNeverReachTheLogOrTheDatabase) {
  const std::string target = Target("pod-t");
  std::map<std::string, std::string> attrs = Attrs({{"common-name", "t"}});
  attrs["csi.storage.k8s.io/serviceAccount.tokens"] =
      R"({"":{"token":"eyJTOKEN-MUST-NOT-LEAK","expirationTimestamp":"2030-01-01T00:00:00Z"}})";
  grpc::Status status = Publish("csi-t", target, attrs);
  ASSERT_TRUE(status.ok()) << status.error_message();
  daemon_->Terminate();  // flushes the WAL into the database file
  EXPECT_EQ(daemon_->log().find("TOKEN-MUST-NOT-LEAK"), std::string::npos);
  EXPECT_EQ(ReadAll(daemon_->data_root() + "/state.db").find("TOKEN-MUST-NOT-LEAK"),
            std::string::npos);
  EXPECT_EQ(ReadAll(daemon_->data_root() + "/state.db-wal").find("TOKEN-MUST-NOT-LEAK"),
            std::string::npos);
  // The private key is not in the log either.
  const std::string key = ReadAll(target + "/tls.key");
  ASSERT_FALSE(key.empty());
  EXPECT_EQ(daemon_->log().find("PRIVATE KEY"), std::string::npos);
}

TEST_F(PublishTest, BadAttributesAreInvalidArgumentAndLeaveNothing) {
  struct Case {
    std::map<std::string, std::string> attrs;
    std::string named;
  } cases[] = {
      {{{"issuer-name", ""}}, "issuer-name"},
      {{{"duration", "5x"}}, "duration"},
      {{{"key-algorithm", "DSA"}}, "key-algorithm"},
      {{{"key-algorithm", "RSA"}, {"key-size", "1024"}}, "key-size"},
      {{{"key-encoding", "PEM"}}, "key-encoding"},
      {{{"dns-names",
         "b\xc3\xbc"
         "cher.example"}},
       "dns-names"},  // not ASCII
      {{{"ip-sans", "300.1.1.1"}}, "ip-sans"},
      {{{"common-name", "${NO_SUCH_VAR}"}}, "POD_NAME"},
      {{{"certificate-file", "../escape"}}, "certificate-file"},
      {{{"is-ca", "yes"}}, "is-ca"},
      {{{"key-usages", "launch missiles"}}, "key-usages"},
      {{{"fs-group", "-1"}}, "fs-group"},
  };
  int n = 0;
  for (const Case& c : cases) {
    std::map<std::string, std::string> attrs = Attrs({{"common-name", "ok"}});
    for (const auto& [k, v] : c.attrs) attrs[std::string(kPrefix) + k] = v;
    const std::string id = "csi-bad-" + std::to_string(n);
    const std::string target = Target("pod-bad-" + std::to_string(n++));
    grpc::Status status = Publish(id, target, attrs);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.named;
    EXPECT_NE(status.error_message().find(c.named), std::string::npos)
        << c.named << ": " << status.error_message();
    EXPECT_FALSE(fs::exists(VolumeDir(id))) << c.named;
    EXPECT_FALSE(fs::exists(target)) << c.named;
  }
  EXPECT_EQ(RowCount(), 0);
}

TEST_F(PublishTest, TargetOutsideRootOrThroughSymlinkIsInvalidArgument) {
  TempDir outside;
  fs::create_directories(outside.path() / "x");
  grpc::Status status =
      Publish("csi-o", (outside.path() / "x/mount").string(), Attrs({{"common-name", "o"}}));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();

  // A symlink inside the pods directory pointing out of it.
  fs::create_directory_symlink(outside.path(), daemon_->target_root() + "/evil");
  status =
      Publish("csi-s", daemon_->target_root() + "/evil/x/mount", Attrs({{"common-name", "s"}}));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_FALSE(fs::exists(outside.path() / "x/mount"));
  EXPECT_EQ(RowCount(), 0);
}

}  // namespace
}  // namespace certmount::testing
