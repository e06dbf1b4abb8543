#include "issue/dn.h"

#include <array>
#include <cctype>
#include <cstddef>
#include <cstdint>

namespace certmount {
namespace {

constexpr std::array<std::string_view, 11> kKnownTypes = {
    "CN", "O", "OU", "C", "ST", "L", "STREET", "postalCode", "serialNumber", "DC", "UID"};

bool IsSpace(char c) { return c == ' '; }

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

// numericoid = number 1*( DOT number ), number without leading zeros.
bool IsNumericOid(std::string_view s) {
  size_t components = 0;
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    std::string_view number = s.substr(start, dot == std::string_view::npos ? dot : dot - start);
    if (number.empty()) return false;
    for (char c : number) {
      if (c < '0' || c > '9') return false;
    }
    if (number.size() > 1 && number[0] == '0') return false;
    ++components;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return components >= 2;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A cursor over the DN; each Parse* method consumes what it recognises.
class DnParser {
 public:
  explicit DnParser(std::string_view dn) : dn_(dn) {}

  Result<std::vector<RdnAttribute>> Parse() {
    std::vector<RdnAttribute> attributes;
    bool continues_rdn = false;
    while (true) {
      SkipSpaces();
      Result<std::string> type = ParseType();
      if (!type.ok()) return type.status();
      SkipSpaces();
      if (AtEnd() || dn_[pos_] != '=') return Error("expected '=' after attribute type");
      ++pos_;
      SkipSpaces();
      Result<std::string> value = ParseValue();
      if (!value.ok()) return value.status();
      attributes.push_back({std::move(*type), std::move(*value), continues_rdn});
      if (AtEnd()) break;
      // ParseValue stops only at the end, ',' or '+'.
      continues_rdn = dn_[pos_] == '+';
      ++pos_;
      SkipSpaces();
      if (AtEnd()) return Error("expected an attribute after the separator");
    }
    return attributes;
  }

 private:
  bool AtEnd() const { return pos_ >= dn_.size(); }

  void SkipSpaces() {
    while (!AtEnd() && IsSpace(dn_[pos_])) ++pos_;
  }

  Status Error(std::string_view what) const {
    return Status::InvalidArgument("invalid RFC 4514 distinguished name \"" + std::string(dn_) +
                                   "\" at offset " + std::to_string(pos_) + ": " +
                                   std::string(what));
  }

  Result<std::string> ParseType() {
    size_t start = pos_;
    while (!AtEnd()) {
      char c = dn_[pos_];
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') break;
      ++pos_;
    }
    std::string_view type = dn_.substr(start, pos_ - start);
    if (type.empty()) return Error("expected an attribute type");
    if (std::isdigit(static_cast<unsigned char>(type[0]))) {
      if (!IsNumericOid(type)) {
        pos_ = start;
        return Error(std::string(1, '"').append(type).append("\" is not a dotted OID"));
      }
      return std::string(type);
    }
    for (std::string_view known : kKnownTypes) {
      if (EqualsIgnoreCase(type, known)) return std::string(known);
    }
    pos_ = start;
    std::string known_list;
    for (std::string_view known : kKnownTypes) {
      known_list += known_list.empty() ? "" : ", ";
      known_list += known;
    }
    return Error("unknown attribute type \"" + std::string(type) + "\"; known types are " +
                 known_list + " or a dotted OID");
  }

  // Reads up to the next unescaped ',' or '+' (or the end).
  Result<std::string> ParseValue() {
    if (!AtEnd() && dn_[pos_] == '#') {
      return Error("'#' hex-encoded (BER) values are not supported; escape a leading '#' as \\#");
    }
    std::string value;
    // Length of `value` up to and including its last character that is not
    // an unescaped space; trailing unescaped spaces are dropped.
    size_t kept = 0;
    while (!AtEnd()) {
      char c = dn_[pos_];
      if (c == ',' || c == '+') break;
      if (c == '\\') {
        ++pos_;
        if (AtEnd()) return Error("'\\' at the end of the value");
        char next = dn_[pos_];
        int high = HexValue(next);
        if (high >= 0) {
          int low = pos_ + 1 < dn_.size() ? HexValue(dn_[pos_ + 1]) : -1;
          if (low < 0)
            return Error("'\\' must be followed by a special character or two hex digits");
          value.push_back(static_cast<char>(high * 16 + low));
          pos_ += 2;
        } else if (std::string_view(" \"#+,;<=>\\").find(next) != std::string_view::npos) {
          value.push_back(next);
          ++pos_;
        } else {
          return Error("'\\' must be followed by a special character or two hex digits");
        }
        kept = value.size();
        continue;
      }
      if (c == '"' || c == ';' || c == '<' || c == '>' || c == '\0') {
        return Error(std::string("'") + (c == '\0' ? std::string("\\0") : std::string(1, c)) +
                     "' must be escaped in a value");
      }
      value.push_back(c);
      if (!IsSpace(c)) kept = value.size();
      ++pos_;
    }
    value.resize(kept);
    if (!IsValidUtf8(value)) return Error("value is not valid UTF-8");
    return value;
  }

  std::string_view dn_;
  size_t pos_ = 0;
};

}  // namespace

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t extra;
    uint32_t code_point;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      extra = 1;
      code_point = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2;
      code_point = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3;
      code_point = c & 0x07;
    } else {
      return false;
    }
    if (i + extra >= s.size()) return false;
    for (size_t k = 1; k <= extra; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      code_point = (code_point << 6) | (cc & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    static constexpr uint32_t kMinForLength[] = {0, 0x80, 0x800, 0x10000};
    if (code_point < kMinForLength[extra] || code_point > 0x10FFFF ||
        (code_point >= 0xD800 && code_point <= 0xDFFF)) {
      return false;
    }
    i += extra + 1;
  }
  return true;
}

Result<std::vector<RdnAttribute>> ParseRfc4514(std::string_view dn) {
  bool only_spaces = true;
  for (char c : dn) only_spaces = only_spaces && IsSpace(c);
  if (only_spaces) return Status::InvalidArgument("distinguished name is empty");
  return DnParser(dn).Parse();
}

}  // namespace certmount
