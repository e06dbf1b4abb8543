// Volume attributes are stored as a JSON object of strings in one column.
#pragma once

#include <map>
#include <string>

#include "common/status.h"

namespace certmount {

// The JSON object text for `attributes`, keys in sorted order.
// INVALID_ARGUMENT if a key or value is not valid UTF-8.
Result<std::string> AttributesToJson(const std::map<std::string, std::string>& attributes);

// Parses a stored attributes column. DATA_LOSS naming `volume_id` when the text
// is not a JSON object whose values are all strings.
Result<std::map<std::string, std::string>> AttributesFromJson(const std::string& json,
                                                              const std::string& volume_id);

}  // namespace certmount
