// The Issuer that hands out the driver-wide trust bundle instead of its
// signer's: the certificate is the signer's, the CA file the source's.
#include "issue/trust_bundle_issuer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "issue/csr.h"
#include "issue/local_ca.h"
#include "issue/private_key.h"
#include "support/temp_dir.h"

namespace certmount {
namespace {

using ::certmount::testing::TempDir;
using namespace std::chrono_literals;

void Save(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// Answers every call from what it was given and records what reached it.
class ScriptedIssuer final : public Issuer {
 public:
  std::string Name() const override { return "scripted"; }
  bool Resumable() const override { return true; }
  std::string RequestName(std::string_view volume_id, uint64_t issuance) const override {
    return std::string(volume_id) + "#" + std::to_string(issuance);
  }
  std::string TrustBundlePem() const override { return "signer bundle"; }
  Result<IssuedCertificate> Issue(const IssueInput& input, std::chrono::steady_clock::time_point,
                                  std::stop_token) override {
    issued.push_back(input.volume_id);
    if (!answer.ok()) return answer;
    return IssuedCertificate{"chain of " + input.volume_id, "signer bundle", std::nullopt};
  }
  void Retire(const std::string& namespace_, const std::string& volume_id,
              std::optional<uint64_t> current_issuance) override {
    retired.push_back(namespace_ + "/" + volume_id + "@" +
                      (current_issuance ? std::to_string(*current_issuance) : "gone"));
  }
  bool KnowsPodRunning(const PodInfo& pod) const override { return pod.uid == "running"; }
  void RetireAllExcept(const std::set<std::string>& live_volume_ids) override {
    kept = live_volume_ids;
  }

  Status answer;
  std::vector<std::string> issued;
  std::vector<std::string> retired;
  std::set<std::string> kept;
};

class TrustBundleIssuerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    signing_ = *GenerateSelfSignedCa("signing CA", 24h, clock_);
    other_ = *GenerateSelfSignedCa("other CA", 24h, clock_);
    Save(bundle_path_, other_.certificate_pem);
    ASSERT_TRUE(source_.Load().ok());
  }

  TempDir dir_;
  const std::string bundle_path_ = dir_.Sub("trust.pem");
  SystemClock& clock_ = SystemClock::Instance();
  CaMaterial signing_;
  CaMaterial other_;
  TrustBundleSource source_{bundle_path_, Env::Default()};
};

TEST_F(TrustBundleIssuerTest, TheLocalCaSignsAndTheSourceGivesTheCaFile) {
  std::unique_ptr<LocalCa> ca =
      LocalCa::FromPem(signing_.certificate_pem, signing_.private_key_pem, clock_).value();
  TrustBundleIssuer issuer(std::move(ca), &source_);
  EXPECT_EQ(issuer.Name(), "local-ca");
  EXPECT_EQ(issuer.TrustBundlePem(), other_.certificate_pem);

  CertificateSpec spec;
  spec.subject.common_name = "pod";
  spec.duration = 1h;
  Result<PrivateKey> key = PrivateKey::Generate(KeyAlgorithm::kEcdsa, 256);
  ASSERT_TRUE(key.ok());
  Result<std::string> csr = BuildCsrPem(*key, spec);
  ASSERT_TRUE(csr.ok());
  const IssueInput input{"vol", *csr, &spec, {}, {}, {}};
  Result<IssuedCertificate> issued = issuer.Issue(input, clock_.SteadyNow() + 30s, {});
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
  EXPECT_EQ(issued->ca_pem, other_.certificate_pem);
  EXPECT_TRUE(
      static_cast<LocalCa*>(issuer.inner())->SignedByCurrentCa(issued->certificate_chain_pem));
  EXPECT_TRUE(issued->leaf.has_value());

  // A new file: the next issuance and the CA file refresh carry it.
  Save(bundle_path_, other_.certificate_pem + signing_.certificate_pem);
  ASSERT_TRUE(source_.Poll().value());
  EXPECT_EQ(issuer.TrustBundlePem(), other_.certificate_pem + signing_.certificate_pem);
  issued = issuer.Issue(input, clock_.SteadyNow() + 30s, {});
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
  EXPECT_EQ(issued->ca_pem, other_.certificate_pem + signing_.certificate_pem);
}

TEST_F(TrustBundleIssuerTest, EverythingElseIsTheWrappedSigners) {
  auto owned = std::make_unique<ScriptedIssuer>();
  ScriptedIssuer* scripted = owned.get();
  TrustBundleIssuer issuer(std::move(owned), &source_);
  EXPECT_EQ(issuer.inner(), scripted);
  EXPECT_EQ(issuer.Name(), "scripted");
  EXPECT_TRUE(issuer.Resumable());
  EXPECT_EQ(issuer.RequestName("vol", 3), "vol#3");
  EXPECT_TRUE(issuer.KnowsPodRunning(PodInfo{"p", "ns", "running", "sa"}));
  EXPECT_FALSE(issuer.KnowsPodRunning(PodInfo{"p", "ns", "other", "sa"}));
  issuer.Retire("ns", "vol", 2);
  issuer.Retire("ns", "old", std::nullopt);
  EXPECT_EQ(scripted->retired, (std::vector<std::string>{"ns/vol@2", "ns/old@gone"}));
  issuer.RetireAllExcept({"a", "b"});
  EXPECT_EQ(scripted->kept, (std::set<std::string>{"a", "b"}));

  const IssueInput input{"vol", "csr", nullptr, {}, {}, {}};
  Result<IssuedCertificate> issued = issuer.Issue(input, {}, {});
  ASSERT_TRUE(issued.ok());
  EXPECT_EQ(issued->certificate_chain_pem, "chain of vol");
  EXPECT_EQ(issued->ca_pem, other_.certificate_pem);

  // The signer's errors come back as they are.
  scripted->answer = Status::Unavailable("signer is down");
  issued = issuer.Issue(input, {}, {});
  EXPECT_EQ(issued.status().code(), Code::kUnavailable);
  EXPECT_EQ(issued.status().message(), "signer is down");
}

TEST_F(TrustBundleIssuerTest, WithoutABundleNothingIsIssued) {
  TrustBundleSource unloaded(dir_.Sub("missing.pem"), Env::Default());
  auto owned = std::make_unique<ScriptedIssuer>();
  ScriptedIssuer* scripted = owned.get();
  TrustBundleIssuer issuer(std::move(owned), &unloaded);
  EXPECT_EQ(issuer.TrustBundlePem(), "");
  const IssueInput input{"vol", "csr", nullptr, {}, {}, {}};
  Result<IssuedCertificate> issued = issuer.Issue(input, {}, {});
  EXPECT_EQ(issued.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(issued.status().message().find(dir_.Sub("missing.pem")), std::string::npos);
  EXPECT_TRUE(scripted->issued.empty()) << "the signer was not asked";
}

}  // namespace
}  // namespace certmount
