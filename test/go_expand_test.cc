// Variable references as Go's os.Expand finds them (issue/go_expand.h).
#include "issue/go_expand.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace certmount {
namespace {

// The pieces written back: text as is, a reference as <name>.
std::string Pieces(std::string_view value) {
  std::string out;
  for (const ExpandPiece& piece : SplitForExpansion(value)) {
    if (piece.is_variable) {
      out.append("<").append(piece.text).append(">");
    } else {
      out.append(piece.text);
    }
  }
  return out;
}

TEST(SplitForExpansion, BracedAndBareNames) {
  EXPECT_EQ(Pieces("${POD_NAME}.svc"), "<POD_NAME>.svc");
  EXPECT_EQ(Pieces("$POD_NAME.svc"), "<POD_NAME>.svc");
  EXPECT_EQ(Pieces("a$POD_IPS-b"), "a<POD_IPS>-b");  // the longest name
  EXPECT_EQ(Pieces("${A}${B}"), "<A><B>");
  EXPECT_EQ(Pieces("plain"), "plain");
  EXPECT_EQ(Pieces(""), "");
}

TEST(SplitForExpansion, SpecialVariablesAreOneCharacter) {
  EXPECT_EQ(Pieces("$$x"), "<$>x");
  EXPECT_EQ(Pieces("$1x"), "<1>x");
  EXPECT_EQ(Pieces("${*}x"), "<*>x");
}

TEST(SplitForExpansion, BadSyntaxIsDroppedAndALoneDollarStays) {
  EXPECT_EQ(Pieces("a${}b"), "ab");
  EXPECT_EQ(Pieces("a${POD_NAME"), "aPOD_NAME");  // "${" without '}' is dropped
  EXPECT_EQ(Pieces("cost $"), "cost $");
  EXPECT_EQ(Pieces("$.x"), "$.x");
  EXPECT_EQ(Pieces("$ x"), "$ x");
}

}  // namespace
}  // namespace certmount
