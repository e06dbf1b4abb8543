// A kubeconfig as an admin (or a damaged file) hands it to --kubeconfig.
// The loader reads a path, so each input is written to a private file first.
#include <unistd.h>

#include <fstream>

#include "fuzz_input.h"
#include "kube/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/certmount-kubeconfig-fuzz-" + std::to_string(getpid());
  {
    std::ofstream file(path, std::ios::binary | std::ios::trunc);
    file.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  (void)certmount::kube::LoadKubeconfig(path);
  (void)certmount::kube::LoadKubeconfig(path, "other");
  return 0;
}
