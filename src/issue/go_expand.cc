#include "issue/go_expand.h"

#include <utility>

namespace certmount {
namespace {

bool IsShellSpecial(char c) {
  return std::string_view("*#$@!?-0123456789").find(c) != std::string_view::npos;
}

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// The name after a '$' and how many bytes it spans. An empty name with a
// width is bad syntax (dropped); width 0 means no name at all.
std::pair<std::string_view, size_t> ShellName(std::string_view s) {
  if (s[0] == '{') {
    if (s.size() > 2 && IsShellSpecial(s[1]) && s[2] == '}') return {s.substr(1, 1), 3};
    const size_t close = s.find('}', 1);
    if (close == std::string_view::npos) return {{}, 1};
    if (close == 1) return {{}, 2};
    return {s.substr(1, close - 1), close + 1};
  }
  if (IsShellSpecial(s[0])) return {s.substr(0, 1), 1};
  size_t end = 0;
  while (end < s.size() && IsNameChar(s[end])) ++end;
  return {s.substr(0, end), end};
}

}  // namespace

std::vector<ExpandPiece> SplitForExpansion(std::string_view value) {
  std::vector<ExpandPiece> pieces;
  size_t literal_start = 0;
  const auto end_literal = [&](size_t end) {
    if (end > literal_start)
      pieces.push_back({false, value.substr(literal_start, end - literal_start)});
  };
  size_t pos = 0;
  while (pos < value.size()) {
    if (value[pos] != '$' || pos + 1 == value.size()) {
      ++pos;
      continue;
    }
    auto [name, width] = ShellName(value.substr(pos + 1));
    if (width == 0) {  // a lone '$' stays as text
      ++pos;
      continue;
    }
    end_literal(pos);
    if (!name.empty()) pieces.push_back({true, name});
    pos += 1 + width;
    literal_start = pos;
  }
  end_literal(value.size());
  return pieces;
}

}  // namespace certmount
