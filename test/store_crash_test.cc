// Kills a process that writes the store at the worst moments and checks that
// the database comes back intact and all-or-nothing.
#include <SQLiteCpp/SQLiteCpp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "common/clock.h"
#include "state/store.h"
#include "support/fake_clock.h"
#include "support/store_test_access.h"
#include "support/temp_dir.h"

namespace certmount {
namespace {

constexpr int kRepetitions = 5;
constexpr char kExistingId[] = "existing";
constexpr char kNewId[] = "new";

// A running store_writer whose stdout we read; killed with SIGKILL on Kill()
// or destruction.
class Writer {
 public:
  Writer(const std::string& db_path, const std::string& mode) {
    int fds[2];
    if (pipe(fds) != 0) return;
    const std::string binary = std::string(TEST_HELPER_DIR) + "/store_writer";
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], STDOUT_FILENO);
      close(fds[0]);
      close(fds[1]);
      execl(binary.c_str(), binary.c_str(), db_path.c_str(), mode.c_str(), kNewId, kExistingId,
            static_cast<char*>(nullptr));
      _exit(127);
    }
    close(fds[1]);
    read_fd_ = fds[0];
  }
  ~Writer() {
    Kill();
    if (read_fd_ >= 0) close(read_fd_);
  }
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // The first line the helper prints, or "" if it exits first. The poll limit
  // only keeps a broken helper from hanging the test run.
  std::string ReadLine() {
    std::string line;
    char c = 0;
    while (true) {
      pollfd pfd{read_fd_, POLLIN, 0};
      if (poll(&pfd, 1, 60'000) <= 0) return line;
      if (read(read_fd_, &c, 1) != 1 || c == '\n') return line;
      line.push_back(c);
    }
  }

  // kill -9 and reap; returns true if it died of SIGKILL (was still running).
  bool Kill() {
    if (pid_ <= 0) return false;
    kill(pid_, SIGKILL);
    int wait_status = 0;
    waitpid(pid_, &wait_status, 0);
    pid_ = -1;
    return WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGKILL;
  }

 private:
  pid_t pid_ = -1;
  int read_fd_ = -1;
};

// A database holding one registered, not yet mounted volume.
void PrepareDatabase(const std::string& db_path, const Clock& clock) {
  auto store = Store::Open(db_path, clock);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  VolumeRecord existing;
  existing.volume_id = kExistingId;
  existing.target_path = "/pods/existing/mount";
  ASSERT_TRUE(StoreTestAccess(**store).RegisterVolume(existing).ok());
}

std::string IntegrityCheck(const std::string& db_path) {
  SQLite::Database db(db_path, SQLite::OPEN_READONLY);
  return db.execAndGet("PRAGMA integrity_check").getString();
}

TEST(StoreCrashTest, KillInsideOpenTransactionLeavesNothingOfIt) {
  testing::FakeClock clock;
  for (int i = 0; i < kRepetitions; ++i) {
    testing::TempDir dir;
    const std::string db_path = dir.Sub("state.db");
    PrepareDatabase(db_path, clock);
    {
      Writer writer(db_path, "hold");
      ASSERT_EQ(writer.ReadLine(), "READY");
      ASSERT_TRUE(writer.Kill()) << "helper was no longer running when killed";
    }
    auto store = Store::Open(db_path, clock);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    EXPECT_EQ(IntegrityCheck(db_path), "ok");

    auto added = (*store)->GetVolume(kNewId);
    ASSERT_TRUE(added.ok());
    EXPECT_FALSE(added->has_value()) << "uncommitted insert survived the kill";
    auto existing = (*store)->GetVolume(kExistingId);
    ASSERT_TRUE(existing.ok());
    ASSERT_TRUE(existing->has_value());
    EXPECT_FALSE((*existing)->mounted) << "uncommitted update survived the kill";
    EXPECT_TRUE((*existing)->serial.empty());

    // And the restart leaves a clean node: the unpublished row goes.
    auto cleanup = StoreTestAccess(**store).StartupCleanup([](const std::string&) { return true; });
    ASSERT_TRUE(cleanup.ok());
    ASSERT_EQ(cleanup->deleted.size(), 1u);
    EXPECT_EQ(cleanup->deleted[0].volume_id, kExistingId);
  }
}

TEST(StoreCrashTest, KillRightAfterCommitKeepsAllOfIt) {
  testing::FakeClock clock;
  for (int i = 0; i < kRepetitions; ++i) {
    testing::TempDir dir;
    const std::string db_path = dir.Sub("state.db");
    PrepareDatabase(db_path, clock);
    {
      Writer writer(db_path, "commit");
      ASSERT_EQ(writer.ReadLine(), "COMMITTED");
      ASSERT_TRUE(writer.Kill());
    }
    auto store = Store::Open(db_path, clock);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    EXPECT_EQ(IntegrityCheck(db_path), "ok");

    auto added = (*store)->GetVolume(kNewId);
    ASSERT_TRUE(added.ok());
    ASSERT_TRUE(added->has_value()) << "committed insert lost";
    EXPECT_EQ((*added)->target_path, "/pods/new/mount");
    EXPECT_EQ((*added)->pod_namespace, "crash");
    EXPECT_EQ((*added)->pod_name, "writer");
    EXPECT_EQ((*added)->issuer, "test-issuer");
    EXPECT_EQ((*added)->attributes.at("certmount.io/common-name"), "crash-test");
    EXPECT_FALSE((*added)->mounted);

    auto existing = (*store)->GetVolume(kExistingId);
    ASSERT_TRUE(existing.ok());
    ASSERT_TRUE(existing->has_value());
    EXPECT_TRUE((*existing)->mounted) << "committed update lost";
    EXPECT_EQ((*existing)->serial, "c0ffee");
    EXPECT_EQ((*existing)->not_after, 2000);
    EXPECT_EQ((*existing)->next_issuance_at, 1500);
  }
}

}  // namespace
}  // namespace certmount
