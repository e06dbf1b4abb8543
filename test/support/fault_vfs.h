// A SQLite VFS that wraps the default one and fails writes or syncs on
// demand (SQLite's own I/O-error testing, in miniature). Installed as the
// process's default VFS, so the Store uses it without knowing.
#pragma once

namespace certmount::testing {

class FaultVfs {
 public:
  // Registers the wrapper as the default VFS (idempotent).
  static void Install();
  // From now on, the `nth` write or sync (1-based) and every one after it
  // fail with `sqlite_error` (e.g. SQLITE_IOERR_WRITE, SQLITE_FULL), as a
  // failing disk keeps failing.
  static void FailFrom(int nth, int sqlite_error);
  // Lets every write through again.
  static void Heal();
  // Writes and syncs seen since the last FailFrom or Heal.
  static int operations();
};

}  // namespace certmount::testing
