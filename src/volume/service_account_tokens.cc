#include "volume/service_account_tokens.h"

namespace certmount {

void ServiceAccountTokens::Set(const std::string& volume_id, std::string token) {
  std::lock_guard lock(mu_);
  tokens_[volume_id] = std::move(token);
}

std::optional<std::string> ServiceAccountTokens::Get(const std::string& volume_id) const {
  std::lock_guard lock(mu_);
  auto it = tokens_.find(volume_id);
  if (it == tokens_.end()) return std::nullopt;
  return it->second;
}

void ServiceAccountTokens::Erase(const std::string& volume_id) {
  std::lock_guard lock(mu_);
  tokens_.erase(volume_id);
}

}  // namespace certmount
