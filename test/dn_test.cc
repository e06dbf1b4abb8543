#include "issue/dn.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace certmount {
namespace {

struct GoodDn {
  std::string dn;
  std::vector<RdnAttribute> expected;
};

class ParseRfc4514GoodTest : public ::testing::TestWithParam<GoodDn> {};

TEST_P(ParseRfc4514GoodTest, ParsesToAttributesInStringOrder) {
  Result<std::vector<RdnAttribute>> parsed = ParseRfc4514(GetParam().dn);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(*parsed, GetParam().expected);
}

INSTANTIATE_TEST_SUITE_P(
    Dns, ParseRfc4514GoodTest,
    ::testing::Values(
        GoodDn{"CN=foo", {{"CN", "foo"}}},
        GoodDn{"CN=foo,O=Bar Inc,C=US", {{"CN", "foo"}, {"O", "Bar Inc"}, {"C", "US"}}},
        // Type names match case-insensitively and come back canonical.
        GoodDn{"cn=a,o=b,ou=c,c=DE,st=d,l=e,street=f,postalcode=g,SERIALNUMBER=h,dc=i,uid=j",
               {{"CN", "a"},
                {"O", "b"},
                {"OU", "c"},
                {"C", "DE"},
                {"ST", "d"},
                {"L", "e"},
                {"STREET", "f"},
                {"postalCode", "g"},
                {"serialNumber", "h"},
                {"DC", "i"},
                {"UID", "j"}}},
        GoodDn{"2.5.4.3=by oid,1.3.6.1.4.1.311.60.2.1.3=DE",
               {{"2.5.4.3", "by oid"}, {"1.3.6.1.4.1.311.60.2.1.3", "DE"}}},
        // Multi-valued RDNs: each attribute separately, joined ones marked.
        GoodDn{"CN=a+UID=b,O=x", {{"CN", "a", false}, {"UID", "b", true}, {"O", "x", false}}},
        GoodDn{"OU=a+OU=b+OU=c", {{"OU", "a", false}, {"OU", "b", true}, {"OU", "c", true}}},
        // Escapes of every special character.
        GoodDn{"CN=a\\,b", {{"CN", "a,b"}}}, GoodDn{"CN=a\\+b", {{"CN", "a+b"}}},
        GoodDn{"CN=a\\;b", {{"CN", "a;b"}}}, GoodDn{"CN=\\<a\\>", {{"CN", "<a>"}}},
        GoodDn{"CN=a\\=b", {{"CN", "a=b"}}}, GoodDn{"CN=a\\\\b", {{"CN", "a\\b"}}},
        GoodDn{"CN=\\\"quoted\\\"", {{"CN", "\"quoted\""}}},
        GoodDn{"CN=\\#hash", {{"CN", "#hash"}}}, GoodDn{"CN=\\ leading", {{"CN", " leading"}}},
        GoodDn{"CN=trailing\\ ", {{"CN", "trailing "}}}, GoodDn{"CN=\\ \\ ", {{"CN", "  "}}},
        GoodDn{"CN=\\41\\62c", {{"CN", "Abc"}}}, GoodDn{"CN=caf\\C3\\A9", {{"CN", "caf\xC3\xA9"}}},
        GoodDn{"CN=a\\2cb", {{"CN", "a,b"}}}, GoodDn{"CN=caf\xC3\xA9", {{"CN", "caf\xC3\xA9"}}},
        // '=' and '#' after the first character need no escape.
        GoodDn{"CN=a=b#c", {{"CN", "a=b#c"}}},
        // Unescaped spaces around separators are ignored; inner ones kept.
        GoodDn{"  CN = foo bar ,  O=x  + OU=y ",
               {{"CN", "foo bar", false}, {"O", "x", false}, {"OU", "y", true}}},
        GoodDn{"CN=", {{"CN", ""}}}, GoodDn{"CN=,O=x", {{"CN", ""}, {"O", "x"}}}));

class ParseRfc4514BadTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ParseRfc4514BadTest, IsInvalidArgument) {
  Result<std::vector<RdnAttribute>> parsed = ParseRfc4514(GetParam());
  ASSERT_FALSE(parsed.ok()) << "parsed \"" << GetParam() << "\"";
  EXPECT_EQ(parsed.status().code(), Code::kInvalidArgument);
  EXPECT_FALSE(parsed.status().message().empty());
}

INSTANTIATE_TEST_SUITE_P(Dns, ParseRfc4514BadTest,
                         ::testing::Values("", "   ", "foo", "CN", "=foo", "CN foo",
                                           "XX=foo",            // unknown type
                                           "emailAddress=a@b",  // not in the supported set
                                           "CN=foo,", "CN=foo+", ",CN=foo", "CN=a,,O=b",
                                           "CN=a++O=b",
                                           "CN=#04024869",  // BER value
                                           "CN=a\\", "CN=a\\zz", "CN=a\\4", "CN=a\\4g", "CN=a;O=b",
                                           "CN=a<b", "CN=a>b", "CN=a\"b", std::string("CN=a\0b", 6),
                                           "1=foo", "01.2=foo", "1..2=foo", "1.2.=foo", "1.x=foo",
                                           "CN=\\C3", "CN=\\FF\\FE",
                                           "CN=\\C0\\80",        // overlong UTF-8
                                           "CN=\\ED\\A0\\80"));  // UTF-16 surrogate

TEST(ParseRfc4514Test, ErrorNamesTheUnknownType) {
  Result<std::vector<RdnAttribute>> parsed = ParseRfc4514("CN=a,FOO=b");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("FOO"), std::string::npos) << parsed.status().message();
}

}  // namespace
}  // namespace certmount
