// The helpers that keep a log record to one bounded line and a user value in
// a message to a bounded, escaped quote.
#include "common/logging.h"

#include <gtest/gtest.h>

#include <string>

namespace certmount {
namespace {

TEST(EscapeControlCharacters, EveryControlByteBecomesAVisibleEscape) {
  const std::string raw("a\nb\rc\td\0e\x1b[31mf\x7fg", 17);
  EXPECT_EQ(EscapeControlCharacters(raw), "a\\nb\\rc\\td\\0e\\x1b[31mf\\x7fg");
  for (int byte = 0; byte < 0x20; ++byte) {
    const std::string escaped = EscapeControlCharacters(std::string(1, static_cast<char>(byte)));
    EXPECT_EQ(escaped.find_first_of(std::string("\0\n\r", 3)), std::string::npos) << byte;
    EXPECT_EQ(escaped[0], '\\') << byte;
  }
  // UTF-8 stays as it is.
  EXPECT_EQ(EscapeControlCharacters("zürich ✓"), "zürich ✓");
}

TEST(QuoteUserValue, ShortValuesAreQuotedWhole) {
  EXPECT_EQ(QuoteUserValue("web-0"), "\"web-0\"");
  EXPECT_EQ(QuoteUserValue("a\nb"), "\"a\\nb\"");
}

TEST(QuoteUserValue, LongValuesAreCutWithTheirLengthNoted) {
  const std::string big(1048576, 'x');
  const std::string quoted = QuoteUserValue(big);
  EXPECT_EQ(quoted, "\"" + std::string(kMaxQuotedValueBytes, 'x') + "...\" (1048576 bytes)");
  // Never inside a UTF-8 sequence: 'é' is two bytes.
  std::string accents;
  for (int i = 0; i < 100; ++i) accents += "é";
  const std::string cut = QuoteUserValue(accents, 5);
  EXPECT_EQ(cut, "\"éé...\" (200 bytes)");
}

TEST(BoundMessage, KeepsShortMessagesAndCutsLongOnesWithinTheLimit) {
  EXPECT_EQ(BoundMessage("short", 64), "short");
  const std::string long_message(100000, 'm');
  const std::string bounded = BoundMessage(long_message, 4096);
  EXPECT_LE(bounded.size(), 4096u);
  EXPECT_NE(bounded.find("[100000 bytes in all]"), std::string::npos) << bounded;
  EXPECT_EQ(bounded.substr(0, 100), std::string(100, 'm'));
}

}  // namespace
}  // namespace certmount
