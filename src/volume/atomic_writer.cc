#include "volume/atomic_writer.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdio>
#include <ctime>
#include <set>
#include <string_view>

#include "common/clock.h"

namespace certmount {
namespace {

constexpr std::string_view kDataLink = "..data";
constexpr std::string_view kDataTmpLink = "..data_tmp";
constexpr size_t kMaxFileNameLength = 255;

bool IsSafeNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

Status ValidateFileNames(const std::vector<FileEntry>& files) {
  std::set<std::string_view> seen;
  for (const FileEntry& file : files) {
    auto invalid = [&](std::string_view why) {
      return Status::InvalidArgument("file name \"" + file.name + "\" " + std::string(why));
    };
    if (file.name.empty()) return invalid("is empty");
    if (file.name.size() > kMaxFileNameLength) return invalid("is too long");
    for (char c : file.name) {
      if (!IsSafeNameChar(c)) return invalid("may contain only letters, digits, '.', '_' and '-'");
    }
    // ".." prefixed names are the writer's own bookkeeping.
    if (file.name == "." || file.name.starts_with("..")) return invalid("is reserved");
    if (!seen.insert(file.name).second) return invalid("appears twice");
  }
  return Status::Ok();
}

// Generation names are "..<UTC timestamp>.<64 random bits>": the timestamp
// helps a human reading the directory, the random part makes them unique.
Result<std::string> NewGenerationName() {
  uint64_t random = 0;
  if (getrandom(&random, sizeof random, 0) != sizeof random) {
    return ErrnoStatus(errno, "getrandom", "");
  }
  time_t now = static_cast<time_t>(SystemClock::Instance().NowUnix());
  struct tm utc {};
  gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y_%m_%d_%H_%M_%S", &utc);
  char name[64];
  std::snprintf(name, sizeof name, "..%s.%016llx", stamp, static_cast<unsigned long long>(random));
  return std::string(name);
}

// A generation name as read back from ..data: one ".." component, no slash.
bool LooksLikeGeneration(std::string_view name) {
  return name.starts_with("..") && name.size() > 2 && name.find('/') == std::string_view::npos &&
         name != kDataLink && name != kDataTmpLink;
}

Status EnsureVolumeDir(const std::string& volume_dir, const FileOwnership& ownership, Env* env) {
  mode_t mode = VolumeDirMode(ownership);
  Result<FileStat> stat = env->LStat(volume_dir);
  if (!stat.ok() && stat.status().code() == Code::kNotFound) {
    size_t slash = volume_dir.find_last_of('/');
    if (slash != std::string::npos && slash > 0) {
      CERTMOUNT_RETURN_IF_ERROR(env->CreateDirectories(volume_dir.substr(0, slash), 0700));
    }
    Status created = env->CreateDir(volume_dir, mode, ownership.gid);
    if (created.ok()) return Status::Ok();
    if (created.code() != Code::kAlreadyExists) return created;
    stat = env->LStat(volume_dir);
  }
  if (!stat.ok()) return stat.status();
  if (stat->type != FileStat::Type::kDirectory) {
    return Status::FailedPrecondition(volume_dir + " is not a directory (or is a symlink)");
  }
  return env->SetDirPermissions(volume_dir, mode, ownership.gid);
}

// The generation ..data points at, or "" when there is none yet.
Result<std::string> CurrentGeneration(const std::string& volume_dir, Env* env) {
  Result<std::string> target = env->ReadLink(volume_dir + "/" + std::string(kDataLink));
  if (!target.ok()) {
    if (target.status().code() == Code::kNotFound) return std::string();
    return target.status();
  }
  if (!LooksLikeGeneration(*target)) {
    return Status::DataLoss(volume_dir + "/..data points at \"" + *target +
                            "\", which is not a generation directory");
  }
  return std::move(target).value();
}

// Removes ".." entries other than ..data and the live generation: what an
// interrupted earlier call left behind.
Status RemoveDebris(const std::string& volume_dir, const std::string& live_generation,
                    const std::vector<std::string>& names, Env* env) {
  for (const std::string& name : names) {
    if (!name.starts_with("..") || name == kDataLink || name == live_generation) continue;
    CERTMOUNT_RETURN_IF_ERROR(env->RemoveTree(volume_dir + "/" + name));
  }
  return Status::Ok();
}

Status WriteGeneration(const std::string& generation_dir, const std::vector<FileEntry>& files,
                       const FileOwnership& ownership, Env* env) {
  for (const FileEntry& file : files) {
    CERTMOUNT_RETURN_IF_ERROR(env->WriteNewFile(generation_dir + "/" + file.name, file.contents,
                                                file.mode, ownership.gid));
  }
  return env->SyncDir(generation_dir);
}

// Points `link_path` at `target` with one rename, replacing whatever is there.
Status ReplaceWithSymlink(const std::string& volume_dir, const std::string& target,
                          const std::string& link_path, Env* env) {
  std::string tmp = volume_dir + "/" + std::string(kDataTmpLink);
  CERTMOUNT_RETURN_IF_ERROR(env->RemoveTree(tmp));
  CERTMOUNT_RETURN_IF_ERROR(env->Symlink(target, tmp));
  Status renamed = env->Rename(tmp, link_path);
  if (!renamed.ok()) (void)env->Remove(tmp);
  return renamed;
}

// Creates `<name> -> ..data/<name>` for every file, leaving correct links as
// they are, and removes links into ..data for names no longer in the set.
Status SyncUserLinks(const std::string& volume_dir, const std::vector<FileEntry>& files,
                     const std::vector<std::string>& names_before, Env* env) {
  std::set<std::string_view> wanted;
  for (const FileEntry& file : files) {
    wanted.insert(file.name);
    std::string link_path = volume_dir + "/" + file.name;
    std::string link_target = std::string(kDataLink) + "/" + file.name;
    Result<std::string> existing = env->ReadLink(link_path);
    if (existing.ok() && *existing == link_target) continue;
    if (!existing.ok() && existing.status().code() == Code::kNotFound) {
      CERTMOUNT_RETURN_IF_ERROR(env->Symlink(link_target, link_path));
      continue;
    }
    // Something else is in the way (a foreign link, a file, a directory).
    CERTMOUNT_ASSIGN_OR_RETURN(FileStat stat, env->LStat(link_path));
    if (stat.type == FileStat::Type::kDirectory) {
      CERTMOUNT_RETURN_IF_ERROR(env->RemoveTree(link_path));
    }
    CERTMOUNT_RETURN_IF_ERROR(ReplaceWithSymlink(volume_dir, link_target, link_path, env));
  }
  std::string data_prefix = std::string(kDataLink) + "/";
  for (const std::string& name : names_before) {
    if (name.starts_with("..") || wanted.contains(name)) continue;
    std::string path = volume_dir + "/" + name;
    Result<std::string> existing = env->ReadLink(path);
    // Only our own links are removed; anything else was not put there by us.
    if (existing.ok() && existing->starts_with(data_prefix)) {
      CERTMOUNT_RETURN_IF_ERROR(env->Remove(path));
    }
  }
  return Status::Ok();
}

}  // namespace

mode_t KeyFileMode(const FileOwnership& ownership) {
  return ownership.gid.has_value() ? 0640 : 0600;
}

mode_t CertFileMode(const FileOwnership&) { return 0644; }

mode_t VolumeDirMode(const FileOwnership& ownership) {
  return ownership.gid.has_value() ? 0750 : 0755;
}

Status WriteFileSet(const std::string& volume_dir, const std::vector<FileEntry>& files,
                    const FileOwnership& ownership, Env* env) {
  CERTMOUNT_RETURN_IF_ERROR(ValidateFileNames(files));
  CERTMOUNT_RETURN_IF_ERROR(EnsureVolumeDir(volume_dir, ownership, env));
  CERTMOUNT_ASSIGN_OR_RETURN(std::string old_generation, CurrentGeneration(volume_dir, env));
  CERTMOUNT_ASSIGN_OR_RETURN(std::vector<std::string> names_before, env->ListDirectory(volume_dir));
  CERTMOUNT_RETURN_IF_ERROR(RemoveDebris(volume_dir, old_generation, names_before, env));

  CERTMOUNT_ASSIGN_OR_RETURN(std::string generation, NewGenerationName());
  std::string generation_dir = volume_dir + "/" + generation;
  CERTMOUNT_RETURN_IF_ERROR(
      env->CreateDir(generation_dir, VolumeDirMode(ownership), ownership.gid));
  // Until the rename below, the previous generation is untouched; any
  // failure up to there only has to take the new directory away again.
  auto abandon = [&](const Status& failure) {
    Status removed = env->RemoveTree(generation_dir);
    if (removed.ok()) return failure;
    return failure.WithContext("(leaving " + generation_dir + " behind: " + removed.ToString() +
                               ")");
  };
  if (Status written = WriteGeneration(generation_dir, files, ownership, env); !written.ok()) {
    return abandon(written);
  }
  std::string data_link = volume_dir + "/" + std::string(kDataLink);
  if (Status swapped = ReplaceWithSymlink(volume_dir, generation, data_link, env); !swapped.ok()) {
    return abandon(swapped);
  }
  CERTMOUNT_RETURN_IF_ERROR(env->SyncDir(volume_dir));

  CERTMOUNT_RETURN_IF_ERROR(SyncUserLinks(volume_dir, files, names_before, env));
  if (!old_generation.empty()) {
    CERTMOUNT_RETURN_IF_ERROR(env->RemoveTree(volume_dir + "/" + old_generation));
  }
  return env->SyncDir(volume_dir);
}

Status RemoveVolumeDir(const std::string& volume_dir, Env* env) {
  Result<FileStat> stat = env->LStat(volume_dir);
  if (!stat.ok()) {
    if (stat.status().code() == Code::kNotFound) return Status::Ok();
    return stat.status();
  }
  if (stat->type == FileStat::Type::kSymlink) return env->Remove(volume_dir);
  return env->RemoveTree(volume_dir);
}

}  // namespace certmount
