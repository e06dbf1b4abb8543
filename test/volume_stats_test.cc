// NodeGetVolumeStats: the CSI translation in NodeService and the health
// rules in VolumeHealthChecker, against a real store and real files. The
// row's target path is the volume's data directory itself, so the files are
// readable through it without a mount.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "csi/node_service.h"
#include "issue/attributes.h"
#include "issue/local_ca.h"
#include "issue/volume_attributes.h"
#include "renew/volume_health.h"
#include "support/fake_clock.h"
#include "support/store_test_access.h"
#include "support/temp_dir.h"
#include "volume/issuance.h"
#include "volume/volume_layout.h"

namespace certmount {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

class VolumeStatsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_root_ = dir_.Sub("data");
    auto material = GenerateSelfSignedCa("stats test CA", 3650 * 24h, clock_);
    ASSERT_TRUE(material.ok());
    auto ca = LocalCa::FromPem(material->certificate_pem, material->private_key_pem, clock_);
    ASSERT_TRUE(ca.ok());
    ca_ = std::move(*ca);
    auto store = Store::Open(dir_.Sub("state.db"), clock_);
    ASSERT_TRUE(store.ok());
    store_ = std::move(*store);
    health_ = std::make_unique<VolumeHealthChecker>(data_root_, AttributeRules{}, store_.get(),
                                                    Env::Default(), &clock_);
    service_ = std::make_unique<NodeService>("node", nullptr, health_.get());
  }

  // A published volume with a one-hour certificate and `extra` attributes;
  // returns its path.
  std::string AddVolume(const std::string& id,
                        const std::map<std::string, std::string>& extra = {}) {
    const VolumeLayout layout = VolumeLayout::For(data_root_, id);
    VolumeRecord record;
    record.volume_id = id;
    record.target_path = layout.data;
    record.attributes = {{"csi.cert-manager.io/issuer-name", "ca"},
                         {"csi.cert-manager.io/dns-names", "stats.example"},
                         {"csi.cert-manager.io/duration", "1h"}};
    record.attributes.insert(extra.begin(), extra.end());
    EXPECT_TRUE(StoreTestAccess(*store_).RegisterVolume(record).ok());
    EXPECT_TRUE(Env::Default()->CreateDirectories(layout.data, 0700).ok());
    auto spec = ParseVolumeAttributes(record.attributes, {});
    IssuanceRequest request;
    request.volume_id = id;
    request.spec = &*spec;
    request.layout = layout;
    auto fields = IssueIntoVolume(request, ca_.get(), Env::Default(), clock_.SteadyNow() + 60s, {});
    EXPECT_TRUE(fields.ok()) << fields.status().ToString();
    EXPECT_TRUE(StoreTestAccess(*store_).MarkMounted(id, *fields).ok());
    return layout.data;
  }

  grpc::Status Stats(const std::string& id, const std::string& path,
                     csi::v1::NodeGetVolumeStatsResponse* response) {
    csi::v1::NodeGetVolumeStatsRequest request;
    request.set_volume_id(id);
    request.set_volume_path(path);
    return service_->NodeGetVolumeStats(nullptr, &request, response);
  }

  int64_t RegularBytesUnder(const std::string& dir) {
    int64_t total = 0;
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
      if (entry.is_regular_file() && !entry.is_symlink()) total += entry.file_size();
    }
    return total;
  }

  testing::TempDir dir_;
  testing::FakeClock clock_;
  std::string data_root_;
  std::unique_ptr<LocalCa> ca_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<VolumeHealthChecker> health_;
  std::unique_ptr<NodeService> service_;
};

TEST_F(VolumeStatsTest, AdvertisesStatsAndCondition) {
  EXPECT_THAT(NodeCapabilities(),
              ::testing::ElementsAre(csi::v1::NodeServiceCapability::RPC::VOLUME_MOUNT_GROUP,
                                     csi::v1::NodeServiceCapability::RPC::GET_VOLUME_STATS,
                                     csi::v1::NodeServiceCapability::RPC::VOLUME_CONDITION));
}

TEST_F(VolumeStatsTest, HealthyVolumeReportsBytesAndNormalCondition) {
  const std::string path = AddVolume("v");
  csi::v1::NodeGetVolumeStatsResponse response;
  grpc::Status status = Stats("v", path, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.usage_size(), 1);
  EXPECT_EQ(response.usage(0).unit(), csi::v1::VolumeUsage::BYTES);
  EXPECT_EQ(response.usage(0).used(), RegularBytesUnder(path));
  EXPECT_GT(response.usage(0).used(), 0);
  EXPECT_FALSE(response.volume_condition().abnormal());
  EXPECT_THAT(response.volume_condition().message(), HasSubstr("valid until"));
}

TEST_F(VolumeStatsTest, ExpiredCertificateIsAbnormal) {
  const std::string path = AddVolume("v");
  clock_.Advance(2h);
  csi::v1::NodeGetVolumeStatsResponse response;
  ASSERT_TRUE(Stats("v", path, &response).ok());
  EXPECT_TRUE(response.volume_condition().abnormal());
  EXPECT_THAT(response.volume_condition().message(), HasSubstr("expired at"));
}

TEST_F(VolumeStatsTest, FailingRenewalIsAbnormalWithAttemptsAndError) {
  const std::string path = AddVolume("v");
  ASSERT_TRUE(store_
                  ->RecordRenewalFailure("v", 3, clock_.NowUnix() + 120,
                                         "UNAVAILABLE: issuer local-ca: signer is down")
                  .ok());
  csi::v1::NodeGetVolumeStatsResponse response;
  ASSERT_TRUE(Stats("v", path, &response).ok());
  EXPECT_TRUE(response.volume_condition().abnormal());
  EXPECT_THAT(response.volume_condition().message(), HasSubstr("3 failed attempts"));
  EXPECT_THAT(response.volume_condition().message(), HasSubstr("signer is down"));
  EXPECT_THAT(response.volume_condition().message(), ::testing::Not(HasSubstr("expired")));
}

TEST_F(VolumeStatsTest, MissingFilesAreAbnormal) {
  const std::string path = AddVolume("v");
  fs::remove(fs::path(path) / "tls.key");
  csi::v1::NodeGetVolumeStatsResponse response;
  ASSERT_TRUE(Stats("v", path, &response).ok());
  EXPECT_TRUE(response.volume_condition().abnormal());
  EXPECT_THAT(response.volume_condition().message(), HasSubstr("files missing"));
  EXPECT_THAT(response.volume_condition().message(), HasSubstr("tls.key"));
  EXPECT_THAT(response.volume_condition().message(), ::testing::Not(HasSubstr("tls.crt")));
}

TEST_F(VolumeStatsTest, MissingCredentialBundleIsAbnormal) {
  const std::string path =
      AddVolume("v", {{std::string(kCredentialBundleFileAttribute), "bundle.pem"}});
  csi::v1::NodeGetVolumeStatsResponse response;
  ASSERT_TRUE(Stats("v", path, &response).ok());
  EXPECT_FALSE(response.volume_condition().abnormal()) << response.volume_condition().message();
  fs::remove(fs::path(path) / "bundle.pem");
  ASSERT_TRUE(Stats("v", path, &response).ok());
  EXPECT_TRUE(response.volume_condition().abnormal());
  EXPECT_THAT(response.volume_condition().message(), HasSubstr("files missing"));
  EXPECT_THAT(response.volume_condition().message(), HasSubstr("bundle.pem"));
}

TEST_F(VolumeStatsTest, UnknownVolumeOrOtherPathIsNotFound) {
  const std::string path = AddVolume("v");
  csi::v1::NodeGetVolumeStatsResponse response;
  EXPECT_EQ(Stats("nope", path, &response).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Stats("v", path + "/other", &response).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Stats("../v", path, &response).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(Stats("v", path + "/", &response).ok());
}

TEST_F(VolumeStatsTest, VolumeStillPublishingIsNotFound) {
  VolumeRecord record;
  record.volume_id = "p";
  record.target_path = dir_.Sub("p");
  ASSERT_TRUE(StoreTestAccess(*store_).RegisterVolume(record).ok());
  csi::v1::NodeGetVolumeStatsResponse response;
  EXPECT_EQ(Stats("p", record.target_path, &response).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(VolumeStatsTest, MissingArgumentsAreInvalid) {
  csi::v1::NodeGetVolumeStatsResponse response;
  EXPECT_EQ(Stats("", "/x", &response).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Stats("v", "", &response).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace certmount
