// certmountd with the crash tests' hold: the same command line and the same
// Node as the shipped daemon (src/cmd/certmountd_main.h), plus a publish
// step hook the shipped binary does not have.
//
//   CERTMOUNT_TEST_HOLD_AT=<step>    a PublishStepName, e.g. key-generated
//   CERTMOUNT_TEST_HOLD_FILE=<path>  where "<step> <volume id>" is appended
//
// With both set, every publish stops forever at that step after announcing
// it in the file, so a test can SIGKILL the process at a known point.
// Started by test/support/daemon.h's Daemon::StartWithHold.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "cmd/certmountd_main.h"

namespace certmount {
namespace {

void InstallHold(NodeOptions& options) {
  const char* step = std::getenv("CERTMOUNT_TEST_HOLD_AT");
  const char* file = std::getenv("CERTMOUNT_TEST_HOLD_FILE");
  if (step == nullptr || file == nullptr) return;
  options.publish_step_hook = [hold_at = std::string(step), announce = std::string(file)](
                                  PublishStep reached, const std::string& volume_id) {
    if (hold_at != PublishStepName(reached)) return;
    std::ofstream(announce, std::ios::app) << PublishStepName(reached) << " " << volume_id << "\n";
    spdlog::warn("test hold at step {} for volume {}", hold_at, volume_id);
    for (;;) pause();
  };
}

}  // namespace
}  // namespace certmount

int main(int argc, char** argv) {
  return certmount::CertmountdMain(argc, argv, certmount::InstallHold);
}
