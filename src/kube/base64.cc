#include "kube/base64.h"

#include <yaml-cpp/binary.h>

#include <algorithm>
#include <cctype>
#include <vector>

namespace certmount::kube {

std::string Base64Encode(std::string_view bytes) {
  return YAML::EncodeBase64(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
}

Result<std::string> Base64Decode(std::string_view text) {
  std::string compact;
  compact.reserve(text.size());
  for (char c : text) {
    if (!std::isspace(static_cast<unsigned char>(c))) compact.push_back(c);
  }
  if (compact.empty()) return std::string();
  // yaml-cpp 0.7 indexes its decoding table with the raw (signed) char, so a
  // byte >= 0x80 reads outside it and can crash (found by fuzz/kubeconfig);
  // only the alphabet may reach it.
  const bool alphabet_only = std::all_of(compact.begin(), compact.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
           c == '/' || c == '=';
  });
  if (!alphabet_only) return Status::InvalidArgument("not valid base64");
  // yaml-cpp signals bad input with an empty result, so a non-empty input
  // must decode to something.
  std::vector<unsigned char> bytes = YAML::DecodeBase64(compact);
  if (bytes.empty() || compact.size() % 4 != 0) {
    return Status::InvalidArgument("not valid base64");
  }
  return std::string(bytes.begin(), bytes.end());
}

}  // namespace certmount::kube
