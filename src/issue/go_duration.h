// Go's duration text, because cert-manager (and so every pod spec written for
// its csi-driver) writes durations the way Go's time package reads them.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "common/status.h"

namespace certmount {

// Parses Go's time.ParseDuration syntax: an optional sign, then one or more
// decimal numbers (fractions allowed: "1.5h", ".5s") each with a unit (ns,
// us, µs, μs, ms, s, m, h), e.g. "2160h", "1h30m", "-90s"; the bare "0" is
// allowed. INVALID_ARGUMENT for anything else and for values outside the
// int64 nanosecond range Go accepts. The message is a bare description
// ("missing unit in duration \"5\""); callers add the attribute name.
Result<std::chrono::nanoseconds> ParseGoDuration(std::string_view text);

// Formats a duration exactly as Go's Duration.String() does, e.g.
// "2160h0m0s", "1h30m0s", "1m30.5s", "45s", "0s", "-5s", "500ms", "1.5\u00b5s".
std::string FormatGoDuration(std::chrono::nanoseconds duration);

}  // namespace certmount
