// Process-wide logging set-up: spdlog to stderr, as text or one JSON object
// per line (for log collectors), and the helpers that keep a record to one
// bounded line whatever a pod author or a damaged disk puts into it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "common/status.h"

namespace certmount {

// `level`: trace, debug, info, warn, error; `format`: text or json. In both
// formats one record is exactly one line: control characters (newline, NUL,
// ESC, ...) in a message are escaped, and a message longer than
// kMaxLogMessageBytes is cut (BoundMessage).
Status ConfigureLogging(const std::string& level, const std::string& format);

// The longest message a log record carries.
inline constexpr std::size_t kMaxLogMessageBytes = 8192;
// The longest user value QuoteUserValue shows.
inline constexpr std::size_t kMaxQuotedValueBytes = 128;

// `text` with every byte below 0x20 and 0x7f written as an escape: \n, \r,
// \t, \0, else \xNN. Other bytes (UTF-8 included) are kept as they are.
std::string EscapeControlCharacters(std::string_view text);

// A value from a pod spec, kubelet or the database for use in a message or a
// log line: in double quotes, control characters escaped, and when longer than
// `max_bytes` cut there (never inside a UTF-8 sequence) with its full length
// noted: "abc..." (1048576 bytes).
std::string QuoteUserValue(std::string_view value, std::size_t max_bytes = kMaxQuotedValueBytes);

// `message` itself when at most `max_bytes` long; otherwise its first bytes
// (cut at a UTF-8 boundary) plus " ... [N bytes in all]", at most `max_bytes`
// in all (`max_bytes` must be at least 64).
std::string BoundMessage(std::string_view message, std::size_t max_bytes);

}  // namespace certmount
