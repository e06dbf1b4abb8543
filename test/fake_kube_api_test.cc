// The fake API server's own behaviour that tests rely on without driving it
// through certmount: spec.username set from the token as the real admission
// sets it, and the approver hook (alone, and playing csi-driver-spiffe's
// approver from support/spiffe_approver.h).
#include "support/fake_kube_api.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "issue/csr.h"
#include "issue/private_key.h"
#include "kube/base64.h"
#include "kube/client.h"
#include "kube/config.h"
#include "support/spiffe_approver.h"

namespace certmount::testing {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;
using nlohmann::json;

constexpr char kCollection[] = "/apis/cert-manager.io/v1/namespaces/sandbox/certificaterequests";
constexpr char kPodId[] = "spiffe://cluster.local/ns/sandbox/sa/sleep";

// The pod's SVID request, as csi-driver-spiffe shapes it.
json SvidRequest(const std::string& name) {
  CertificateSpec spec;
  spec.uris = {kPodId};
  Result<PrivateKey> key = PrivateKey::Generate(KeyAlgorithm::kEcdsa, 256);
  if (!key.ok()) {
    ADD_FAILURE() << key.status().ToString();
    return json();
  }
  Result<std::string> csr = BuildCsrPem(*key, spec);
  if (!csr.ok()) {
    ADD_FAILURE() << csr.status().ToString();
    return json();
  }
  return {
      {"apiVersion", "cert-manager.io/v1"},
      {"kind", "CertificateRequest"},
      {"metadata",
       {{"name", name},
        {"namespace", "sandbox"},
        {"annotations", {{"spiffe.csi.cert-manager.io/identity", kPodId}}}}},
      {"spec",
       {{"request", kube::Base64Encode(*csr)},
        {"duration", "1h0m0s"},
        {"isCA", false},
        {"usages", {"key encipherment", "digital signature", "client auth", "server auth"}},
        {"issuerRef",
         {{"name", "my-spiffe-ca"}, {"kind", "ClusterIssuer"}, {"group", "cert-manager.io"}}}}}};
}

class FakeKubeApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kube::KubeConfig config;
    config.server = api_.url();
    config.ca_pem = api_.server_ca_pem();
    config.token = FakeKubeApi::kToken;
    Result<std::unique_ptr<kube::Client>> client = kube::Client::Create(config);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(*client);
    api_.PutPod("sandbox", "sleep-0", "uid-sleep-0");
  }

  // Creates `body` with `token` ("" for the driver's); the created object.
  json Create(const json& body, const std::string& token = "") {
    Result<kube::Response> response = client_->Call({"POST", kCollection, body.dump(), token},
                                                    std::chrono::steady_clock::now() + 10s, {});
    EXPECT_TRUE(response.ok()) << response.status().ToString();
    if (!response.ok()) return json();
    EXPECT_EQ(response->http_status, 201) << response->body;
    return json::parse(response->body);
  }

  // The request as the server holds it now.
  json Stored(const std::string& name) { return api_.Object("sandbox", name).value_or(json()); }

  static std::string Condition(const json& request, const std::string& type,
                               const std::string& field = "status") {
    const json status = request.value("status", json::object());
    for (const json& condition : status.value("conditions", json::array())) {
      if (condition.value("type", "") == type) return condition.value(field, "");
    }
    return "";
  }

  FakeKubeApi api_;
  std::unique_ptr<kube::Client> client_;
};

// ---- spec.username ---------------------------------------------------------------------

TEST_F(FakeKubeApiTest, TheDriversTokenCreatesAsTheDriverWhateverTheClientSent) {
  json body = SvidRequest("by-driver");
  body["spec"]["username"] = "system:admin";
  json created = Create(body);
  EXPECT_EQ(created["spec"]["username"], FakeKubeApi::kDriverUsername);
  EXPECT_EQ(Stored("by-driver")["spec"]["username"], FakeKubeApi::kDriverUsername);
  // The record keeps what the client sent.
  EXPECT_EQ(api_.PostedBodies().back()["spec"]["username"], "system:admin");
}

TEST_F(FakeKubeApiTest, ABoundTokenCreatesAsThePodsServiceAccount) {
  api_.BindToken("sleep-token", "sandbox", "sleep-0", "sleep");
  EXPECT_EQ(Create(SvidRequest("bound"), "sleep-token")["spec"]["username"],
            "system:serviceaccount:sandbox:sleep");
  api_.BindToken("unnamed-token", "sandbox", "sleep-0");
  EXPECT_EQ(Create(SvidRequest("bound-default"), "unnamed-token")["spec"]["username"],
            "system:serviceaccount:sandbox:default");
}

TEST_F(FakeKubeApiTest, AnAcceptedTokenIsTheDriversUnlessItNamesAnotherUser) {
  api_.AcceptToken("rotated-token");
  EXPECT_EQ(Create(SvidRequest("rotated"), "rotated-token")["spec"]["username"],
            FakeKubeApi::kDriverUsername);
  api_.AcceptToken("other-token", "system:serviceaccount:sandbox:sleep");
  EXPECT_EQ(Create(SvidRequest("other"), "other-token")["spec"]["username"],
            "system:serviceaccount:sandbox:sleep");
}

// ---- the approver hook -------------------------------------------------------------------

TEST_F(FakeKubeApiTest, TheApproverSeesTheStoredRequestBeforeAnyStatus) {
  std::optional<json> seen;
  api_.SetApprover([&](const json& request) -> std::optional<std::string> {
    seen = request;
    return std::nullopt;
  });
  json body = SvidRequest("");
  body["metadata"].erase("name");
  body["metadata"]["generateName"] = "csi-";
  json created = Create(body);
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ((*seen)["metadata"]["name"], created["metadata"]["name"]);
  EXPECT_EQ((*seen)["spec"]["username"], FakeKubeApi::kDriverUsername);
  EXPECT_FALSE(seen->contains("status"));
}

TEST_F(FakeKubeApiTest, AnApproversDenialIsTheOutcomeWhateverThePolicy) {
  api_.SetApprover([](const json&) { return std::optional<std::string>("not this one"); });
  for (SignerPolicy policy :
       {SignerPolicy::kApprove, SignerPolicy::kPending, SignerPolicy::kFail}) {
    api_.SetPolicy(policy, "policy message");
    const std::string name = "denied-" + std::to_string(static_cast<int>(policy));
    Create(SvidRequest(name));
    json stored = Stored(name);
    EXPECT_EQ(Condition(stored, "Denied"), "True") << stored.dump();
    EXPECT_EQ(Condition(stored, "Denied", "message"), "not this one");
    EXPECT_EQ(Condition(stored, "Ready", "reason"), "Denied");
    EXPECT_FALSE(stored["status"].contains("certificate"));
  }
}

TEST_F(FakeKubeApiTest, AnApproversDenialWaitsForTheSignDelay) {
  api_.SetApprover([](const json&) { return std::optional<std::string>("later"); });
  api_.SetSignDelay(500ms);
  Create(SvidRequest("delayed"));
  EXPECT_FALSE(Stored("delayed").contains("status"));
  EXPECT_TRUE(api_.WaitUntil([&] { return Condition(Stored("delayed"), "Denied") == "True"; }));
}

TEST_F(FakeKubeApiTest, AnApproversApprovalLeavesTheAnswerToThePolicy) {
  int asked = 0;
  api_.SetApprover([&](const json&) -> std::optional<std::string> {
    ++asked;
    return std::nullopt;
  });
  Create(SvidRequest("signed"));
  EXPECT_EQ(Condition(Stored("signed"), "Ready"), "True");
  EXPECT_FALSE(Stored("signed")["status"].value("certificate", "").empty());
  api_.SetPolicy(SignerPolicy::kPending);
  Create(SvidRequest("pending"));
  EXPECT_FALSE(Stored("pending").contains("status"));
  EXPECT_EQ(asked, 2);

  api_.SetApprover(nullptr);
  api_.SetPolicy(SignerPolicy::kApprove);
  Create(SvidRequest("unasked"));
  EXPECT_EQ(Condition(Stored("unasked"), "Ready"), "True");
  EXPECT_EQ(asked, 2);
}

TEST_F(FakeKubeApiTest, PlaysCsiDriverSpiffesApprover) {
  const SpiffeApproverConfig config;
  api_.SetApprover([config](const json& request) -> std::optional<std::string> {
    SpiffeApproverOutcome outcome = Evaluate(request, config);
    if (outcome.decision == SpiffeApproverDecision::kDenied) return outcome.reason;
    return std::nullopt;
  });
  api_.BindToken("sleep-token", "sandbox", "sleep-0", "sleep");
  Create(SvidRequest("own-identity"), "sleep-token");
  EXPECT_EQ(Condition(Stored("own-identity"), "Ready"), "True") << Stored("own-identity").dump();

  // The driver asking with its own token for the pod's identity: the
  // default mode compares the URI with the requester's own SPIFFE ID.
  Create(SvidRequest("driver-asks"));
  json denied = Stored("driver-asks");
  EXPECT_EQ(Condition(denied, "Denied"), "True") << denied.dump();
  EXPECT_THAT(Condition(denied, "Denied", "message"),
              HasSubstr("may only have \"spiffe://cluster.local/ns/certmount/sa/certmount\""));
}

}  // namespace
}  // namespace certmount::testing
