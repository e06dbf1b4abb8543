#include "common/logging.h"

#include <nlohmann/json.hpp>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <ctime>

namespace certmount {

namespace {

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
        {"msg", std::string(msg.payload.data(), msg.payload.size())},
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
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %^%l%$ %v", spdlog::pattern_time_type::utc);
  } else {
    return Status::InvalidArgument("--log-format: must be text or json, not \"" + format + "\"");
  }
  logger->set_level(parsed);
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
  return Status::Ok();
}

}  // namespace certmount
