// Process-wide logging set-up: spdlog to stderr, as text or one JSON object
// per line (for log collectors).
#pragma once

#include <string>

#include "common/status.h"

namespace certmount {

// `level`: trace, debug, info, warn, error; `format`: text or json.
Status ConfigureLogging(const std::string& level, const std::string& format);

}  // namespace certmount
