#include "common/logging.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <ctime>

namespace certmount {

namespace {

// The payload a record may show: bounded, and in the text format with its
// control characters escaped (JSON escapes them itself).
std::string BoundedPayload(const spdlog::details::log_msg& msg) {
  return BoundMessage(std::string_view(msg.payload.data(), msg.payload.size()),
                      kMaxLogMessageBytes);
}

// The text format: spdlog's pattern over the escaped, bounded payload, so a
// newline in a pod's attribute can never forge a second record.
class TextFormatter final : public spdlog::formatter {
 public:
  TextFormatter()
      : pattern_(std::make_unique<spdlog::pattern_formatter>("%Y-%m-%dT%H:%M:%S.%eZ %l %v",
                                                             spdlog::pattern_time_type::utc)) {}
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const std::string payload = EscapeControlCharacters(BoundedPayload(msg));
    spdlog::details::log_msg escaped = msg;
    escaped.payload = spdlog::string_view_t(payload.data(), payload.size());
    pattern_->format(escaped, dest);
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<TextFormatter>();
  }

 private:
  std::unique_ptr<spdlog::pattern_formatter> pattern_;
};

// Where a cut may fall: not before a UTF-8 continuation byte.
std::size_t Utf8Boundary(std::string_view text, std::size_t at) {
  while (at > 0 && at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) {
    --at;
  }
  return at;
}

// One JSON object per line; nlohmann-json does the escaping so a message can
// never break the line structure.
class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const auto since_epoch = msg.time.time_since_epoch();
    const auto secs = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
    const auto millis =
        std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch - secs).count();
    std::time_t t = secs.count();
    std::tm utc{};
    gmtime_r(&t, &utc);
    char stamp[40];
    std::size_t n = std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &utc);
    std::snprintf(stamp + n, sizeof(stamp) - n, ".%03lldZ", static_cast<long long>(millis));
    nlohmann::json line = {
        {"time", stamp},
        {"level", std::string(spdlog::level::to_string_view(msg.level).data(),
                              spdlog::level::to_string_view(msg.level).size())},
        {"msg", BoundedPayload(msg)},
    };
    std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    text.push_back('\n');
    dest.append(text.data(), text.data() + text.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>();
  }
};

}  // namespace

Status ConfigureLogging(const std::string& level, const std::string& format) {
  spdlog::level::level_enum parsed = spdlog::level::from_str(level);
  if (parsed == spdlog::level::off && level != "off") {
    return Status::InvalidArgument("--log-level: unknown level \"" + level +
                                   "\" (trace, debug, info, warn, error)");
  }
  auto logger = spdlog::stderr_logger_mt("certmount");
  if (format == "json") {
    logger->set_formatter(std::make_unique<JsonFormatter>());
  } else if (format == "text") {
    logger->set_formatter(std::make_unique<TextFormatter>());
  } else {
    return Status::InvalidArgument("--log-format: must be text or json, not \"" + format + "\"");
  }
  logger->set_level(parsed);
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
  return Status::Ok();
}

std::string EscapeControlCharacters(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte != 0x7f) {
      out.push_back(c);
      continue;
    }
    switch (c) {
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\0':
        out += "\\0";
        break;
      default: {
        char hex[5];
        std::snprintf(hex, sizeof(hex), "\\x%02x", byte);
        out += hex;
      }
    }
  }
  return out;
}

std::string QuoteUserValue(std::string_view value, std::size_t max_bytes) {
  // Appended piece by piece: "\"" + std::string draws GCC 12 -O3
  // -Wrestrict false positives.
  std::string out(1, '"');
  if (value.size() <= max_bytes) {
    out += EscapeControlCharacters(value);
    out.push_back('"');
    return out;
  }
  out += EscapeControlCharacters(value.substr(0, Utf8Boundary(value, max_bytes)));
  out += "...\" (";
  out += std::to_string(value.size());
  out += " bytes)";
  return out;
}

std::string BoundMessage(std::string_view message, std::size_t max_bytes) {
  if (message.size() <= max_bytes) return std::string(message);
  const std::string note = " ... [" + std::to_string(message.size()) + " bytes in all]";
  const std::size_t keep = max_bytes > note.size() ? max_bytes - note.size() : 0;
  return std::string(message.substr(0, Utf8Boundary(message, keep))) + note;
}

}  // namespace certmount
