#include "state/attributes_json.h"

#include <nlohmann/json.hpp>

namespace certmount {

Result<std::string> AttributesToJson(const std::map<std::string, std::string>& attributes) {
  try {
    return nlohmann::json(attributes).dump();
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(std::string("volume attributes cannot be stored: ") + e.what());
  }
}

Result<std::map<std::string, std::string>> AttributesFromJson(const std::string& json,
                                                              const std::string& volume_id) {
  const nlohmann::json parsed = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object()) {
    return Status::DataLoss("volume " + volume_id +
                            ": stored attributes are not a JSON object: " + json);
  }
  std::map<std::string, std::string> attributes;
  for (const auto& [key, value] : parsed.items()) {
    if (!value.is_string()) {
      return Status::DataLoss("volume " + volume_id + ": stored attribute '" + key +
                              "' is not a string");
    }
    attributes.emplace(key, value.get<std::string>());
  }
  return attributes;
}

}  // namespace certmount
