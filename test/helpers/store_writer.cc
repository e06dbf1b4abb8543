// Helper for test/store_crash_test.cc: a process that holds the store in a
// chosen state so the test can kill -9 it there.
//
//   store_writer <db_path> hold|commit <new_volume_id> <existing_volume_id>
//
// In one write transaction it registers <new_volume_id> and marks
// <existing_volume_id> mounted. "hold" prints READY while the transaction is
// still open; "commit" prints COMMITTED after it committed. Either way it then
// waits to be killed. Failures print "ERROR <status>" and exit 1.
#include <unistd.h>

#include <cstdio>
#include <string>

#include "common/clock.h"
#include "state/store.h"
#include "support/store_test_access.h"

namespace {

int Fail(const certmount::Status& status) {
  std::printf("ERROR %s\n", status.ToString().c_str());
  std::fflush(stdout);
  return 1;
}

void AnnounceAndWait(const char* line) {
  std::printf("%s\n", line);
  std::fflush(stdout);
  for (;;) pause();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s <db_path> hold|commit <new_volume_id> <existing_volume_id>\n",
                 argv[0]);
    return 2;
  }
  const std::string db_path = argv[1];
  const std::string mode = argv[2];
  if (mode != "hold" && mode != "commit") {
    std::fprintf(stderr, "mode must be hold or commit\n");
    return 2;
  }

  auto store = certmount::Store::Open(db_path, certmount::SystemClock::Instance());
  if (!store.ok()) return Fail(store.status());

  certmount::VolumeRecord volume;
  volume.volume_id = argv[3];
  volume.target_path = "/pods/" + volume.volume_id + "/mount";
  volume.pod_namespace = "crash";
  volume.pod_name = "writer";
  volume.attributes = {{"certmount.io/common-name", "crash-test"}};
  volume.issuer = "test-issuer";
  const certmount::IssuedCertificateFields cert{"c0ffee", 1000, 2000, 1500};

  const bool hold = mode == "hold";
  certmount::Status status =
      certmount::StoreTestAccess(**store).WriteInOneTransaction(volume, argv[4], cert, [hold] {
        if (hold) AnnounceAndWait("READY");
      });
  if (!status.ok()) return Fail(status);
  AnnounceAndWait("COMMITTED");
}
