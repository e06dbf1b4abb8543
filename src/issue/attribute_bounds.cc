#include "issue/attribute_bounds.h"

#include <array>
#include <string_view>

#include "common/logging.h"
#include "issue/attributes.h"
#include "issue/go_expand.h"

namespace certmount {
namespace {

// The attributes whose values go through ${...} expansion.
constexpr std::array<std::string_view, 14> kTemplatedKeys = {
    "common-name", "literal-subject", "serial-number", "organizations",    "organizational-units",
    "countries",   "provinces",       "localities",    "street-addresses", "postal-codes",
    "dns-names",   "ip-sans",         "uri-sans",      "email-sans",
};
constexpr std::array<std::string_view, 4> kSanKeys = {"dns-names", "ip-sans", "uri-sans",
                                                      "email-sans"};

std::string Kib(std::size_t bytes) { return std::to_string(bytes / 1024) + " KiB"; }

std::string Lookup(const std::map<std::string, std::string>& context, std::string_view key) {
  auto it = context.find(std::string(key));
  return it == context.end() ? std::string() : it->second;
}

// The most text one variable reference puts into a value: kubelet's value,
// the longest address for the pod's addresses, and an unknown variable as
// written (parsing rejects it later).
std::size_t ExpandedVariableSize(std::string_view name,
                                 const std::map<std::string, std::string>& context) {
  for (const auto& [variable, source] : kExpansionVariables) {
    if (name == variable) return Lookup(context, source).size();
  }
  if (name == kPodIpVariable || name == kPodIpsVariable) return kMaxPodAddressText;
  return name.size() + 3;  // "${" and "}"
}

// The value's length once expanded, computed without expanding: references
// are found by the parser's own rule (SplitForExpansion), $NAME as ${NAME}.
std::size_t ExpandedSize(std::string_view value,
                         const std::map<std::string, std::string>& context) {
  std::size_t size = 0;
  for (const ExpandPiece& piece : SplitForExpansion(value)) {
    size += piece.is_variable ? ExpandedVariableSize(piece.text, context) : piece.text.size();
  }
  return size;
}

// Comma-separated entries that hold more than blanks, as the parser counts.
std::size_t ListEntries(std::string_view value) {
  std::size_t entries = 0;
  bool blank = true;
  for (char c : value) {
    if (c == ',') {
      entries += blank ? 0 : 1;
      blank = true;
    } else if (c != ' ' && c != '\t') {
      blank = false;
    }
  }
  return entries + (blank ? 0 : 1);
}

Status TooLarge(std::string_view key, const std::string& what, std::size_t limit_bytes) {
  return Status::InvalidArgument(std::string(key) + ": " + what + ", over the limit of " +
                                 Kib(limit_bytes));
}

}  // namespace

Status CheckAttributeBounds(const std::map<std::string, std::string>& volume_context) {
  for (const auto& [key, value] : volume_context) {
    if (key == kServiceAccountTokens) continue;
    if (value.size() > kMaxAttributeValueBytes) {
      return TooLarge(EscapeControlCharacters(BoundMessage(key, 256)),
                      "value is " + std::to_string(value.size()) + " bytes",
                      kMaxAttributeValueBytes);
    }
  }
  std::size_t total = 0;
  for (const auto& [key, value] : volume_context) total += key.size() + value.size();
  if (total > kMaxVolumeContextBytes) {
    return TooLarge("volume context", "keys and values take " + std::to_string(total) + " bytes",
                    kMaxVolumeContextBytes);
  }
  for (std::string_view name : kTemplatedKeys) {
    const std::string key = std::string(kAttributePrefix) + std::string(name);
    auto it = volume_context.find(key);
    if (it == volume_context.end()) continue;
    const std::size_t expanded = ExpandedSize(it->second, volume_context);
    if (expanded > kMaxExpandedValueBytes) {
      return TooLarge(key, "value expands to " + std::to_string(expanded) + " bytes",
                      kMaxExpandedValueBytes);
    }
  }
  std::size_t sans = 0;
  for (std::string_view name : kSanKeys) {
    const std::string key = std::string(kAttributePrefix) + std::string(name);
    sans += ListEntries(Lookup(volume_context, key));
    if (sans > kMaxSubjectAltNames) {
      return Status::InvalidArgument(
          key + ": more than " + std::to_string(kMaxSubjectAltNames) +
          " subject alternative names in dns-names, ip-sans, uri-sans and email-sans together");
    }
  }
  return Status::Ok();
}

}  // namespace certmount
