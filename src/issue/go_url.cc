#include "issue/go_url.h"

#include <algorithm>

namespace certmount {
namespace {

// Go's url.encoding modes that ParseRequestURI and String() use.
enum class Mode { kPath, kHost, kUserPassword };

bool IsAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool IsHex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}

// Go's shouldEscape for the modes above.
bool ShouldEscape(char c, Mode mode) {
  if (IsAlnum(c)) return false;
  if (mode == Mode::kHost &&
      std::string_view("!$&'()*+,;=:[]<>\"").find(c) != std::string_view::npos) {
    return false;
  }
  if (std::string_view("-_.~").find(c) != std::string_view::npos) return false;
  if (std::string_view("$&+,/:;=?@").find(c) != std::string_view::npos) {
    switch (mode) {
      case Mode::kPath:
        return c == '?';
      case Mode::kUserPassword:
        return c == '@' || c == '/' || c == '?' || c == ':';
      case Mode::kHost:
        break;
    }
  }
  return true;
}

// Go's unescape: decodes %XX, refusing a bad escape and, in a host, an
// escaped ASCII byte other than %25 or a character a host may not hold.
Result<std::string> Unescape(std::string_view s, Mode mode) {
  std::string decoded;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '%') {
      if (i + 2 >= s.size() || !IsHex(s[i + 1]) || !IsHex(s[i + 2])) {
        return Status::InvalidArgument("invalid URL escape");
      }
      if (mode == Mode::kHost && HexValue(s[i + 1]) < 8 && s.substr(i, 3) != "%25") {
        return Status::InvalidArgument("invalid URL escape in host");
      }
      decoded.push_back(static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2])));
      i += 2;
      continue;
    }
    if (mode == Mode::kHost && static_cast<unsigned char>(c) < 0x80 && ShouldEscape(c, mode)) {
      return Status::InvalidArgument("invalid character in host name");
    }
    decoded.push_back(c);
  }
  return decoded;
}

std::string Escape(std::string_view s, Mode mode) {
  static constexpr char kHexDigits[] = "0123456789ABCDEF";
  std::string escaped;
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x80 && !ShouldEscape(c, mode)) {
      escaped.push_back(c);
      continue;
    }
    const auto byte = static_cast<unsigned char>(c);
    escaped.push_back('%');
    escaped.push_back(kHexDigits[byte >> 4]);
    escaped.push_back(kHexDigits[byte & 15]);
  }
  return escaped;
}

// Go's validEncoded(s, encodePath): s may stand for itself in a path.
bool ValidEncodedPath(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::string_view("!$&'()*+,;=:@[]%").find(c) != std::string_view::npos ||
           (static_cast<unsigned char>(c) < 0x80 && !ShouldEscape(c, Mode::kPath));
  });
}

// Go's setPath then EscapedPath: the path as String() writes it.
Result<std::string> EscapedPath(std::string_view raw) {
  Result<std::string> path = Unescape(raw, Mode::kPath);
  if (!path.ok()) return path.status();
  if (ValidEncodedPath(raw)) return std::string(raw);
  if (*path == "*") return std::string("*");
  return Escape(*path, Mode::kPath);
}

// Go's validOptionalPort: "" or ':' followed by digits.
bool ValidOptionalPort(std::string_view port) {
  if (port.empty()) return true;
  return port[0] == ':' &&
         std::all_of(port.begin() + 1, port.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Go's parseHost, returning the host as String() writes it.
Result<std::string> Host(std::string_view host) {
  std::string_view port;
  if (host.starts_with('[')) {
    size_t close = host.rfind(']');
    if (close == std::string_view::npos) return Status::InvalidArgument("missing ']' in host");
    port = host.substr(close + 1);
  } else if (size_t colon = host.rfind(':'); colon != std::string_view::npos) {
    port = host.substr(colon);
  }
  if (!ValidOptionalPort(port)) return Status::InvalidArgument("invalid port after host");
  Result<std::string> decoded = Unescape(host, Mode::kHost);
  if (!decoded.ok()) return decoded.status();
  return Escape(*decoded, Mode::kHost);
}

// Go's validUserinfo.
bool ValidUserinfo(std::string_view userinfo) {
  return std::all_of(userinfo.begin(), userinfo.end(), [](char c) {
    return IsAlnum(c) || std::string_view("-._:~!$&'()*+,;=%@").find(c) != std::string_view::npos;
  });
}

// Go's parseAuthority, returning "userinfo@host" as String() writes it.
Result<std::string> Authority(std::string_view authority) {
  const size_t at = authority.rfind('@');
  Result<std::string> host =
      Host(at == std::string_view::npos ? authority : authority.substr(at + 1));
  if (!host.ok() || at == std::string_view::npos) return host;
  std::string_view userinfo = authority.substr(0, at);
  if (!ValidUserinfo(userinfo)) return Status::InvalidArgument("invalid userinfo");
  std::string written;
  const size_t colon = userinfo.find(':');
  Result<std::string> user = Unescape(userinfo.substr(0, colon), Mode::kUserPassword);
  if (!user.ok()) return user.status();
  written = Escape(*user, Mode::kUserPassword);
  if (colon != std::string_view::npos) {
    Result<std::string> password = Unescape(userinfo.substr(colon + 1), Mode::kUserPassword);
    if (!password.ok()) return password.status();
    written.append(":").append(Escape(*password, Mode::kUserPassword));
  }
  written.append("@").append(*host);
  return written;
}

// Go's getScheme: the lower-cased scheme before the first ':' (empty when
// there is none), with `rest` set to what follows it.
Result<std::string> SplitScheme(std::string_view uri, std::string_view& rest) {
  rest = uri;
  for (size_t i = 0; i < uri.size(); ++i) {
    const char c = uri[i];
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) continue;
    if (i > 0 && ((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.')) continue;
    if (c != ':') return std::string();
    if (i == 0) return Status::InvalidArgument("missing protocol scheme");
    std::string scheme(uri.substr(0, i));
    std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                   [](char s) { return (s >= 'A' && s <= 'Z') ? static_cast<char>(s + 32) : s; });
    rest = uri.substr(i + 1);
    return scheme;
  }
  return std::string();
}

// A rooted rest ("/..." or, after a scheme, "//authority/..."), as Go
// writes it back: the authority, then the escaped path.
Result<std::string> RootedPart(std::string_view rest, bool has_scheme) {
  std::string written;
  std::string authority;
  bool has_authority = false;
  if (has_scheme && rest.starts_with("//")) {
    std::string_view text = rest.substr(2);
    const size_t slash = text.find('/');
    rest = slash == std::string_view::npos ? std::string_view() : text.substr(slash);
    CERTMOUNT_ASSIGN_OR_RETURN(authority, Authority(text.substr(0, slash)));
    has_authority = true;
  }
  CERTMOUNT_ASSIGN_OR_RETURN(std::string path, EscapedPath(rest));
  // Go writes "//" when there is a host, user info or path after the scheme.
  if (has_authority && (!authority.empty() || !path.empty())) {
    written.append("//").append(authority);
  }
  return written.append(path);
}

}  // namespace

Result<std::string> GoRequestUri(std::string_view uri) {
  if (std::any_of(uri.begin(), uri.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
    return Status::InvalidArgument("invalid control character in URL");
  }
  if (uri.empty()) return Status::InvalidArgument("empty url");
  if (uri == "*") return std::string("*");
  std::string_view rest;
  CERTMOUNT_ASSIGN_OR_RETURN(const std::string scheme, SplitScheme(uri, rest));
  std::string_view query;
  const size_t question = rest.find('?');
  const bool has_query = question != std::string_view::npos;
  if (has_query) {
    query = rest.substr(question + 1);
    rest = rest.substr(0, question);
  }
  std::string written;
  if (!scheme.empty()) written.append(scheme).append(":");
  if (!rest.starts_with('/')) {
    // With a scheme, a rootless rest is opaque and kept as written.
    if (scheme.empty()) return Status::InvalidArgument("invalid URI for request");
    written.append(rest);
  } else {
    CERTMOUNT_ASSIGN_OR_RETURN(const std::string rooted, RootedPart(rest, !scheme.empty()));
    written.append(rooted);
  }
  if (has_query) written.append("?").append(query);
  if (std::any_of(written.begin(), written.end(),
                  [](char c) { return static_cast<unsigned char>(c) >= 0x80; })) {
    return Status::InvalidArgument("not ASCII where Go keeps it as written (an IA5String)");
  }
  return written;
}

}  // namespace certmount
