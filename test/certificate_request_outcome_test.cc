// Decoding the API server's CertificateRequest objects
// (issue/certificate_request_outcome.h), including the inputs the
// certificate_request fuzz target taught us about.
#include "issue/certificate_request_outcome.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "kube/base64.h"

namespace certmount {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

constexpr char kPem[] = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
constexpr char kCaPem[] = "-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE-----\n";

json WithConditions(json conditions, json status = json::object()) {
  status["conditions"] = std::move(conditions);
  return json{{"metadata", {{"name", "r"}, {"namespace", "ns"}}}, {"status", status}};
}

TEST(CertificateRequestOutcomeTest, ReadyGivesChainAndCa) {
  auto outcome = CertificateRequestOutcome(
      WithConditions(
          json::array({{{"type", "Ready"}, {"status", "True"}}}),
          {{"certificate", kube::Base64Encode(kPem)}, {"ca", kube::Base64Encode(kCaPem)}}),
      "ns/r", nullptr);
  ASSERT_TRUE(outcome.has_value());
  ASSERT_TRUE(outcome->ok()) << outcome->status().ToString();
  EXPECT_EQ((*outcome)->certificate_chain_pem, kPem);
  EXPECT_EQ((*outcome)->ca_pem, kCaPem);
}

TEST(CertificateRequestOutcomeTest, DeniedIsFailedPreconditionWithReason) {
  auto outcome = CertificateRequestOutcome(
      WithConditions(json::array(
          {{{"type", "Denied"}, {"status", "True"}, {"reason", "Policy"}, {"message", "no"}}})),
      "ns/r", nullptr);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->status().code(), Code::kFailedPrecondition);
  EXPECT_THAT(outcome->status().message(), HasSubstr("denied (Policy): no"));
}

// Regression (fuzz target certificate_request, corpus wrong_types.json):
// nlohmann's value(key, default) threw type_error on a field of another JSON
// type, and the exception would have left the watch thread.
TEST(CertificateRequestOutcomeTest, FieldsOfTheWrongTypeCountAsAbsent) {
  json object = WithConditions(
      json::array({{{"type", 1}, {"status", true}, {"reason", json::object()}, {"message", {1}}},
                   "not an object",
                   {{"type", "Ready"}, {"status", "True"}, {"message", 7}}}),
      {{"certificate", 5}, {"ca", nullptr}});
  object["metadata"]["name"] = json::array();
  std::string pending;
  std::optional<Result<IssuedCertificate>> outcome;
  ASSERT_NO_THROW(outcome = CertificateRequestOutcome(object, "ns/r", &pending));
  EXPECT_FALSE(outcome.has_value());  // Ready=True but no certificate yet
  EXPECT_THAT(pending, HasSubstr("Ready=True"));
}

TEST(CertificateRequestOutcomeTest, AnythingButAnObjectIsPending) {
  for (const json& value : {json(nullptr), json(3), json("text"), json::array({1, 2}),
                            json::parse("{", nullptr, false)}) {
    std::string pending;
    std::optional<Result<IssuedCertificate>> outcome;
    ASSERT_NO_THROW(outcome = CertificateRequestOutcome(value, "ns/r", &pending));
    EXPECT_FALSE(outcome.has_value()) << value.dump();
    EXPECT_EQ(pending, "Approved=unset, Ready=unset");
  }
}

}  // namespace
}  // namespace certmount
