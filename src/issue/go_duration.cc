#include "issue/go_duration.h"

#include <array>
#include <cstdint>
#include <limits>
#include <utility>

namespace certmount {
namespace {

// Go's units in nanoseconds. Longer spellings first where one is a prefix of
// another ("ms" before "m").
constexpr std::array<std::pair<std::string_view, uint64_t>, 8> kUnits = {{
    {"ns", 1},
    {"us", 1'000},
    {"\xC2\xB5s", 1'000},  // U+00B5 MICRO SIGN
    {"\xCE\xBCs", 1'000},  // U+03BC GREEK SMALL LETTER MU
    {"ms", 1'000'000},
    {"s", 1'000'000'000},
    {"m", 60'000'000'000},
    {"h", 3'600'000'000'000},
}};

constexpr uint64_t kMaxMagnitude = uint64_t{1} << 63;  // |INT64_MIN|

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

Status Invalid(std::string_view what, std::string_view text) {
  return Status::InvalidArgument(std::string(what) + " duration \"" + std::string(text) + "\"");
}

// Reads the digits at the front of `rest` into `whole`. False when there are
// none; `overflow` is set when they exceed kMaxMagnitude (overflow of the
// whole duration).
bool ReadWhole(std::string_view& rest, uint64_t& whole, bool& overflow) {
  bool digits = false;
  while (!rest.empty() && IsDigit(rest[0])) {
    digits = true;
    uint64_t digit = static_cast<uint64_t>(rest[0] - '0');
    if (whole > (kMaxMagnitude - digit) / 10) overflow = true;
    if (!overflow) whole = whole * 10 + digit;
    rest.remove_prefix(1);
  }
  return digits;
}

// A fraction read as value / scale.
struct Fraction {
  unsigned __int128 value = 0;
  unsigned __int128 scale = 1;
  bool digits = false;
};

// Reads ".ddd" at the front of `rest`, if there is one. Digits beyond what
// 128-bit arithmetic needs cannot change the nanosecond result, so they are
// read and dropped.
Fraction ReadFraction(std::string_view& rest) {
  Fraction fraction;
  if (rest.empty() || rest[0] != '.') return fraction;
  rest.remove_prefix(1);
  while (!rest.empty() && IsDigit(rest[0])) {
    fraction.digits = true;
    if (fraction.scale < static_cast<unsigned __int128>(10'000'000'000'000'000'000ULL)) {
      fraction.value = fraction.value * 10 + static_cast<unsigned>(rest[0] - '0');
      fraction.scale *= 10;
    }
    rest.remove_prefix(1);
  }
  return fraction;
}

// Reads the unit at the front of `rest`: its length in nanoseconds.
// `text` is the whole duration, for the messages.
Result<uint64_t> ReadUnit(std::string_view& rest, std::string_view text) {
  size_t unit_length = 0;
  while (unit_length < rest.size() && rest[unit_length] != '.' && !IsDigit(rest[unit_length])) {
    ++unit_length;
  }
  if (unit_length == 0) return Invalid("missing unit in", text);
  std::string_view unit_text = rest.substr(0, unit_length);
  uint64_t unit = 0;
  for (const auto& [name, nanoseconds] : kUnits) {
    if (unit_text == name) unit = nanoseconds;
  }
  if (unit == 0) {
    return Status::InvalidArgument("unknown unit \"" + std::string(unit_text) +
                                   "\" in duration \"" + std::string(text) + "\"");
  }
  rest.remove_prefix(unit_length);
  return unit;
}

// Reads one "<number><unit>" at the front of `rest` and returns it in
// nanoseconds (possibly more than any duration holds; the caller checks).
Result<unsigned __int128> ReadComponent(std::string_view& rest, std::string_view text) {
  if (!IsDigit(rest[0]) && rest[0] != '.') return Invalid("invalid", text);
  uint64_t whole = 0;
  bool overflow = false;
  const bool whole_digits = ReadWhole(rest, whole, overflow);
  if (overflow) return Invalid("invalid", text);
  const Fraction fraction = ReadFraction(rest);
  if (!whole_digits && !fraction.digits) return Invalid("invalid", text);
  CERTMOUNT_ASSIGN_OR_RETURN(const uint64_t unit, ReadUnit(rest, text));
  return static_cast<unsigned __int128>(whole) * unit + fraction.value * unit / fraction.scale;
}

}  // namespace

Result<std::chrono::nanoseconds> ParseGoDuration(std::string_view text) {
  std::string_view rest = text;
  bool negative = false;
  if (!rest.empty() && (rest[0] == '-' || rest[0] == '+')) {
    negative = rest[0] == '-';
    rest.remove_prefix(1);
  }
  if (rest == "0") return std::chrono::nanoseconds(0);
  if (rest.empty()) return Invalid("invalid", text);

  uint64_t total = 0;
  while (!rest.empty()) {
    CERTMOUNT_ASSIGN_OR_RETURN(unsigned __int128 value, ReadComponent(rest, text));
    value += total;
    if (value > kMaxMagnitude) return Invalid("invalid", text);
    total = static_cast<uint64_t>(value);
  }
  if (!negative && total == kMaxMagnitude) return Invalid("invalid", text);
  int64_t signed_total = negative ? static_cast<int64_t>(~total + 1) : static_cast<int64_t>(total);
  return std::chrono::nanoseconds(signed_total);
}

namespace {

// Go's fmtFrac: ".ddd" for the low `digits` decimal digits of `value`
// without trailing zeros (nothing when they are all zero); `value` keeps the
// rest.
std::string FractionDigits(uint64_t& value, int digits) {
  std::string fraction;
  bool significant = false;
  for (int i = 0; i < digits; ++i) {
    const char digit = static_cast<char>('0' + value % 10);
    significant = significant || digit != '0';
    if (significant) fraction.insert(fraction.begin(), digit);
    value /= 10;
  }
  if (significant) fraction.insert(fraction.begin(), '.');
  return fraction;
}

}  // namespace

std::string FormatGoDuration(std::chrono::nanoseconds duration) {
  const int64_t count = duration.count();
  if (count == 0) return "0s";
  // Work on the magnitude as unsigned so INT64_MIN does not overflow.
  uint64_t magnitude = count < 0 ? ~static_cast<uint64_t>(count) + 1 : static_cast<uint64_t>(count);
  std::string text = count < 0 ? "-" : "";
  if (magnitude < 1'000'000'000) {
    // Under a second: the largest of ns, µs and ms that keeps a whole part.
    int digits = 0;
    const char* unit = "ns";
    if (magnitude >= 1'000'000) {
      digits = 6;
      unit = "ms";
    } else if (magnitude >= 1'000) {
      digits = 3;
      unit = "\u00b5s";
    }
    std::string fraction = FractionDigits(magnitude, digits);
    text.append(std::to_string(magnitude)).append(fraction).append(unit);
    return text;
  }
  std::string fraction = FractionDigits(magnitude, 9);
  const uint64_t hours = magnitude / 3600;
  const uint64_t minutes = magnitude / 60 % 60;
  const uint64_t seconds = magnitude % 60;
  if (hours > 0) text.append(std::to_string(hours)).append("h");
  if (hours > 0 || minutes > 0) text.append(std::to_string(minutes)).append("m");
  text.append(std::to_string(seconds)).append(fraction).append("s");
  return text;
}

}  // namespace certmount
