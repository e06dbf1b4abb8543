// Helpers shared by the libFuzzer targets: turning the fuzzer's bytes into
// the inputs the parsers take.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace certmount::fuzz {

inline std::string_view AsText(const uint8_t* data, size_t size) {
  return std::string_view(reinterpret_cast<const char*>(data), size);
}

// Splits at NUL bytes: the targets' inputs are NUL-separated fields.
inline std::vector<std::string_view> SplitAtNul(std::string_view text) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == '\0') {
      parts.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  return parts;
}

// The volume context kubelet sends for pod web-0 in namespace default,
// plus the pairs `key NUL value NUL key NUL value ...` from `text`. A key
// without a '/' is taken as a csi.cert-manager.io/ attribute, so the seeds
// stay short and the fuzzer reaches the parser's keys easily.
inline std::map<std::string, std::string> VolumeContextFrom(std::string_view text) {
  std::map<std::string, std::string> context = {
      {"csi.storage.k8s.io/ephemeral", "true"},
      {"csi.storage.k8s.io/pod.name", "web-0"},
      {"csi.storage.k8s.io/pod.namespace", "default"},
      {"csi.storage.k8s.io/pod.uid", "0b5c1c8e-8f5e-4c4e-9d3a-2f9a4f0e6b11"},
      {"csi.storage.k8s.io/serviceAccount.name", "web"},
  };
  std::vector<std::string_view> parts = SplitAtNul(text);
  for (size_t i = 0; i + 1 < parts.size(); i += 2) {
    std::string key(parts[i]);
    if (key.find('/') == std::string::npos) key = "csi.cert-manager.io/" + key;
    context[key] = std::string(parts[i + 1]);
  }
  return context;
}

}  // namespace certmount::fuzz
