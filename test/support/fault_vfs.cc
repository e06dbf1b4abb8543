#include "support/fault_vfs.h"

#include <sqlite3.h>

#include <atomic>
#include <cstring>

namespace certmount::testing {
namespace {

sqlite3_vfs* g_real = nullptr;
sqlite3_vfs g_vfs;
sqlite3_io_methods g_methods;
std::atomic<int> g_operations{0};
std::atomic<int> g_fail_from{0};  // 0: never
std::atomic<int> g_error{SQLITE_IOERR};

// Our file object: the wrapper's header, the real file's object after it.
struct FaultFile {
  sqlite3_file base;
  sqlite3_file* real;
};

sqlite3_file* Real(sqlite3_file* file) { return reinterpret_cast<FaultFile*>(file)->real; }

bool ShouldFail() {
  const int n = ++g_operations;
  const int from = g_fail_from.load();
  return from > 0 && n >= from;
}

int Close(sqlite3_file* f) { return Real(f)->pMethods->xClose(Real(f)); }
int Read(sqlite3_file* f, void* buffer, int amount, sqlite3_int64 offset) {
  return Real(f)->pMethods->xRead(Real(f), buffer, amount, offset);
}
int Write(sqlite3_file* f, const void* buffer, int amount, sqlite3_int64 offset) {
  if (ShouldFail()) return g_error.load();
  return Real(f)->pMethods->xWrite(Real(f), buffer, amount, offset);
}
int Truncate(sqlite3_file* f, sqlite3_int64 size) {
  return Real(f)->pMethods->xTruncate(Real(f), size);
}
int Sync(sqlite3_file* f, int flags) {
  if (ShouldFail()) return SQLITE_IOERR_FSYNC;
  return Real(f)->pMethods->xSync(Real(f), flags);
}
int FileSize(sqlite3_file* f, sqlite3_int64* size) {
  return Real(f)->pMethods->xFileSize(Real(f), size);
}
int Lock(sqlite3_file* f, int level) { return Real(f)->pMethods->xLock(Real(f), level); }
int Unlock(sqlite3_file* f, int level) { return Real(f)->pMethods->xUnlock(Real(f), level); }
int CheckReservedLock(sqlite3_file* f, int* out) {
  return Real(f)->pMethods->xCheckReservedLock(Real(f), out);
}
int FileControl(sqlite3_file* f, int op, void* arg) {
  return Real(f)->pMethods->xFileControl(Real(f), op, arg);
}
int SectorSize(sqlite3_file* f) { return Real(f)->pMethods->xSectorSize(Real(f)); }
int DeviceCharacteristics(sqlite3_file* f) {
  return Real(f)->pMethods->xDeviceCharacteristics(Real(f));
}
int ShmMap(sqlite3_file* f, int region, int size, int extend, void volatile** out) {
  return Real(f)->pMethods->xShmMap(Real(f), region, size, extend, out);
}
int ShmLock(sqlite3_file* f, int offset, int n, int flags) {
  return Real(f)->pMethods->xShmLock(Real(f), offset, n, flags);
}
void ShmBarrier(sqlite3_file* f) { Real(f)->pMethods->xShmBarrier(Real(f)); }
int ShmUnmap(sqlite3_file* f, int delete_flag) {
  return Real(f)->pMethods->xShmUnmap(Real(f), delete_flag);
}
int Fetch(sqlite3_file* f, sqlite3_int64 offset, int amount, void** out) {
  return Real(f)->pMethods->xFetch(Real(f), offset, amount, out);
}
int Unfetch(sqlite3_file* f, sqlite3_int64 offset, void* page) {
  return Real(f)->pMethods->xUnfetch(Real(f), offset, page);
}

int Open(sqlite3_vfs*, const char* name, sqlite3_file* file, int flags, int* out_flags) {
  auto* wrapper = reinterpret_cast<FaultFile*>(file);
  wrapper->real = reinterpret_cast<sqlite3_file*>(wrapper + 1);
  wrapper->base.pMethods = nullptr;
  int rc = g_real->xOpen(g_real, name, wrapper->real, flags, out_flags);
  if (rc == SQLITE_OK && wrapper->real->pMethods != nullptr) {
    wrapper->base.pMethods = &g_methods;
  }
  return rc;
}

}  // namespace

void FaultVfs::Install() {
  if (g_real != nullptr) return;
  g_real = sqlite3_vfs_find(nullptr);
  g_methods = sqlite3_io_methods{3,
                                 Close,
                                 Read,
                                 Write,
                                 Truncate,
                                 Sync,
                                 FileSize,
                                 Lock,
                                 Unlock,
                                 CheckReservedLock,
                                 FileControl,
                                 SectorSize,
                                 DeviceCharacteristics,
                                 ShmMap,
                                 ShmLock,
                                 ShmBarrier,
                                 ShmUnmap,
                                 Fetch,
                                 Unfetch};
  g_vfs = *g_real;  // delete, access, randomness, time... stay the real ones
  g_vfs.zName = "certmount-fault";
  g_vfs.szOsFile = static_cast<int>(sizeof(FaultFile)) + g_real->szOsFile;
  g_vfs.xOpen = Open;
  g_vfs.pNext = nullptr;
  sqlite3_vfs_register(&g_vfs, /*makeDflt=*/1);
}

void FaultVfs::FailFrom(int nth, int sqlite_error) {
  g_operations = 0;
  g_error = sqlite_error;
  g_fail_from = nth;
}

void FaultVfs::Heal() {
  g_fail_from = 0;
  g_operations = 0;
}

int FaultVfs::operations() { return g_operations.load(); }

}  // namespace certmount::testing
