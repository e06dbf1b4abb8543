// The latest service account token kubelet handed over for each volume
// (--use-token-request). Kept in memory only: tokens are short-lived
// secrets, never written to the database or a file. After a restart a
// renewal waits until kubelet republishes the volume with a fresh token
// (the CSIDriver's requiresRepublish makes it do so periodically).
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace certmount {

class ServiceAccountTokens {
 public:
  void Set(const std::string& volume_id, std::string token);
  std::optional<std::string> Get(const std::string& volume_id) const;
  void Erase(const std::string& volume_id);

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::string> tokens_;
};

}  // namespace certmount
