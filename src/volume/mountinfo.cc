#include "volume/mountinfo.h"

#include <charconv>
#include <set>

#include "common/env.h"

namespace certmount {
namespace {

bool IsOctalDigit(char c) { return c >= '0' && c <= '7'; }

// Undoes the kernel's mangle(): "\ooo" becomes the byte with that octal value.
std::string DecodeOctalEscapes(std::string_view field) {
  // Most fields hold no escape; copying them whole keeps a table of 10,000
  // mounts quick to parse.
  if (field.find('\\') == std::string_view::npos) return std::string(field);
  std::string decoded;
  decoded.reserve(field.size());
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() && IsOctalDigit(field[i + 1]) &&
        IsOctalDigit(field[i + 2]) && IsOctalDigit(field[i + 3])) {
      decoded.push_back(static_cast<char>(((field[i + 1] - '0') << 6) |
                                          ((field[i + 2] - '0') << 3) | (field[i + 3] - '0')));
      i += 3;
    } else {
      decoded.push_back(field[i]);
    }
  }
  return decoded;
}

// Splits `line` at spaces into `fields`, which is reused from line to line
// so a large table does not allocate a vector per mount.
void SplitFields(std::string_view line, std::vector<std::string_view>& fields) {
  fields.clear();
  size_t start = 0;
  while (start <= line.size()) {
    size_t space = line.find(' ', start);
    if (space == std::string_view::npos) space = line.size();
    if (space > start) fields.push_back(line.substr(start, space - start));
    start = space + 1;
  }
}

template <typename Int>
bool ParseNumber(std::string_view text, Int& out) {
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
  return error == std::errc() && end == text.data() + text.size();
}

Result<MountInfoEntry> ParseLine(std::string_view line, size_t line_number,
                                 std::vector<std::string_view>& fields) {
  auto malformed = [&](std::string_view why) {
    return Status::Internal("mountinfo line " + std::to_string(line_number) + " is malformed (" +
                            std::string(why) + "): " + std::string(line));
  };
  SplitFields(line, fields);
  // 6 fixed fields, optional fields, "-", then fstype, source, super options.
  size_t separator = 6;
  while (separator < fields.size() && fields[separator] != "-") ++separator;
  if (fields.size() < 6 || separator + 3 > fields.size()) return malformed("too few fields");

  MountInfoEntry entry;
  if (!ParseNumber(fields[0], entry.mount_id)) return malformed("mount id");
  if (!ParseNumber(fields[1], entry.parent_id)) return malformed("parent id");
  std::string_view device = fields[2];
  size_t colon = device.find(':');
  if (colon == std::string_view::npos || !ParseNumber(device.substr(0, colon), entry.major) ||
      !ParseNumber(device.substr(colon + 1), entry.minor)) {
    return malformed("major:minor");
  }
  entry.root = DecodeOctalEscapes(fields[3]);
  entry.mount_point = DecodeOctalEscapes(fields[4]);
  entry.mount_options = DecodeOctalEscapes(fields[5]);
  entry.fstype = DecodeOctalEscapes(fields[separator + 1]);
  entry.source = DecodeOctalEscapes(fields[separator + 2]);
  if (separator + 3 < fields.size())
    entry.super_options = DecodeOctalEscapes(fields[separator + 3]);
  return entry;
}

}  // namespace

Result<std::vector<MountInfoEntry>> ParseMountInfo(std::string_view text) {
  std::vector<MountInfoEntry> entries;
  std::vector<std::string_view> fields;
  size_t line_number = 0;
  while (!text.empty()) {
    size_t newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text = newline == std::string_view::npos ? std::string_view() : text.substr(newline + 1);
    ++line_number;
    if (line.empty()) continue;
    CERTMOUNT_ASSIGN_OR_RETURN(MountInfoEntry entry, ParseLine(line, line_number, fields));
    entries.push_back(std::move(entry));
  }
  return entries;
}

Result<std::vector<MountInfoEntry>> ReadMountInfo(Env* env, const std::string& path) {
  CERTMOUNT_ASSIGN_OR_RETURN(std::string text, env->ReadFile(path));
  return ParseMountInfo(text);
}

Result<std::vector<MountInfoEntry>> ReadMountInfo(const std::string& path) {
  return ReadMountInfo(Env::Default(), path);
}

bool IsMountPoint(const std::vector<MountInfoEntry>& entries, const std::string& path) {
  for (const MountInfoEntry& entry : entries) {
    if (entry.mount_point == path) return true;
  }
  return false;
}

bool HasMountOption(std::string_view options, std::string_view option) {
  while (!options.empty()) {
    size_t comma = options.find(',');
    if (options.substr(0, comma) == option) return true;
    if (comma == std::string_view::npos) break;
    options.remove_prefix(comma + 1);
  }
  return false;
}

MountTable::MountTable(std::vector<MountInfoEntry> entries) : entries_(std::move(entries)) {
  std::map<std::string_view, std::vector<size_t>> indices_at;
  for (size_t i = 0; i < entries_.size(); ++i) indices_at[entries_[i].mount_point].push_back(i);
  for (const auto& [point, indices] : indices_at) {
    Slot slot{indices.back(), indices.size()};
    if (indices.size() > 1) {
      // A mount stacked on another at the same point names it as its parent,
      // so the top one is the one that is no other's parent there.
      std::set<int> parents;
      for (size_t i : indices) parents.insert(entries_[i].parent_id);
      for (size_t i : indices) {
        if (!parents.contains(entries_[i].mount_id)) slot.top = i;
      }
    }
    by_mount_point_.emplace(std::string(point), slot);
  }
}

Result<MountTable> MountTable::Read(Env* env, const std::string& path) {
  CERTMOUNT_ASSIGN_OR_RETURN(std::vector<MountInfoEntry> entries, ReadMountInfo(env, path));
  return MountTable(std::move(entries));
}

Result<MountTable> MountTable::Read(const std::string& path) { return Read(Env::Default(), path); }

bool MountTable::IsMountPoint(const std::string& path) const {
  return by_mount_point_.find(path) != by_mount_point_.end();
}

const MountInfoEntry* MountTable::TopMountAt(const std::string& path) const {
  auto it = by_mount_point_.find(path);
  return it == by_mount_point_.end() ? nullptr : &entries_[it->second.top];
}

size_t MountTable::MountCountAt(const std::string& path) const {
  auto it = by_mount_point_.find(path);
  return it == by_mount_point_.end() ? 0 : it->second.count;
}

std::vector<const MountInfoEntry*> MountTable::MountsAt(const std::string& path) const {
  std::vector<const MountInfoEntry*> out;
  if (MountCountAt(path) == 0) return out;
  if (MountCountAt(path) == 1) return {TopMountAt(path)};
  // Stacks are rare and short; a scan keeps the index at one slot per point.
  for (const MountInfoEntry& entry : entries_) {
    if (entry.mount_point == path) out.push_back(&entry);
  }
  return out;
}

const MountInfoEntry* MountTable::ContainingMount(const std::string& path) const {
  // Walks up to the nearest mount point: O(depth * log mounts), never a scan.
  std::string point = path;
  while (!point.empty()) {
    if (const MountInfoEntry* mount = TopMountAt(point)) return mount;
    if (point == "/") break;
    size_t slash = point.find_last_of('/');
    if (slash == std::string::npos) break;
    point = slash == 0 ? "/" : point.substr(0, slash);
  }
  return nullptr;
}

}  // namespace certmount
