// Size bounds on a volume context, checked before parsing.
#include "issue/attribute_bounds.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace certmount {
namespace {

using Context = std::map<std::string, std::string>;

Context Base() {
  return {{"csi.cert-manager.io/issuer-name", "ca"},
          {"csi.storage.k8s.io/pod.name", std::string(253, 'p')},
          {"csi.storage.k8s.io/pod.namespace", "default"}};
}

std::string Repeat(const std::string& piece, size_t times) {
  std::string out;
  for (size_t i = 0; i < times; ++i) out += piece;
  return out;
}

void ExpectRejected(const Context& context, const std::string& names_key,
                    const std::string& names_limit) {
  Status status = CheckAttributeBounds(context);
  ASSERT_EQ(status.code(), Code::kInvalidArgument) << names_key;
  EXPECT_EQ(status.message().rfind(names_key, 0), 0u) << status.message();
  EXPECT_NE(status.message().find(names_limit), std::string::npos) << status.message();
  EXPECT_LT(status.message().size(), 512u);
}

TEST(AttributeBounds, OrdinaryContextsPass) {
  Context context = Base();
  context["csi.cert-manager.io/common-name"] = "${POD_NAME}.${POD_NAMESPACE}.svc";
  context["csi.cert-manager.io/dns-names"] = Repeat("${POD_NAME}.example.com,", 50);
  EXPECT_TRUE(CheckAttributeBounds(context).ok());
}

TEST(AttributeBounds, OneLargeValueIsRejectedNamingItsKey) {
  Context context = Base();
  context["csi.cert-manager.io/dns-names"] = std::string(1 << 20, 'a');
  ExpectRejected(context, "csi.cert-manager.io/dns-names", "16 KiB");
  Context annotation = Base();
  annotation["example.com/blob"] = std::string(kMaxAttributeValueBytes + 1, 'a');
  ExpectRejected(annotation, "example.com/blob", "16 KiB");
}

TEST(AttributeBounds, ExpansionIsBoundedBeforeItHappens) {
  Context context = Base();
  // 15.4 KB as written, 354 KB once ${POD_NAME} is 253 bytes.
  context["csi.cert-manager.io/common-name"] = Repeat("${POD_NAME}", 1400);
  ExpectRejected(context, "csi.cert-manager.io/common-name", "expands to 354200 bytes");
  // The same value is fine where nothing expands (an annotation).
  Context annotation = Base();
  annotation["example.com/note"] = Repeat("${POD_NAME}", 1400);
  EXPECT_TRUE(CheckAttributeBounds(annotation).ok());
}

TEST(AttributeBounds, ReferencesWithoutBracesAndPodAddressesCountToo) {
  Context context = Base();
  // $POD_NAME is the same reference as ${POD_NAME}: 14 KB as written.
  context["csi.cert-manager.io/dns-names"] = Repeat("$POD_NAME,", 1400);
  ExpectRejected(context, "csi.cert-manager.io/dns-names", "expands to 355600 bytes");
  // A pod address counts as the longest one, 39 bytes: 15 KB as written.
  Context addresses = Base();
  addresses["csi.cert-manager.io/dns-names"] = Repeat("${POD_IP}.a,", 1300);
  ExpectRejected(addresses, "csi.cert-manager.io/dns-names", "expands to 54600 bytes");
  // Text that only looks like a reference is counted as written.
  Context literal = Base();
  literal["csi.cert-manager.io/common-name"] = Repeat("$.", 7000);
  EXPECT_TRUE(CheckAttributeBounds(literal).ok());
}

TEST(AttributeBounds, SubjectAltNamesAreCountedAcrossTheLists) {
  Context context = Base();
  // Blank entries (a trailing comma) do not count, as the parser skips them.
  context["csi.cert-manager.io/dns-names"] = Repeat("a,", 600);
  context["csi.cert-manager.io/ip-sans"] = Repeat("1.2.3.4, ", 400);
  EXPECT_TRUE(CheckAttributeBounds(context).ok());  // 600 + 400
  context["csi.cert-manager.io/email-sans"] = "a@b";
  ExpectRejected(context, "csi.cert-manager.io/email-sans", "1000");
}

TEST(AttributeBounds, TheTotalIsBoundedTokensIncluded) {
  Context context = Base();
  for (int i = 0; i < 9; ++i) {
    context["example.com/k" + std::to_string(i)] = std::string(15 * 1024, 'v');
  }
  ExpectRejected(context, "volume context", "128 KiB");
  Context tokens = Base();
  tokens["csi.storage.k8s.io/serviceAccount.tokens"] = std::string(64 * 1024, 't');
  EXPECT_TRUE(CheckAttributeBounds(tokens).ok());
}

}  // namespace
}  // namespace certmount
