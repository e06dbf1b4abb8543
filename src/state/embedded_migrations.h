// The SQL migrations compiled into the binary. cmake/embed_files.cmake
// generates the definition from migrations/*.sql, so certmountd needs no files
// from disk to create or upgrade its database.
#pragma once

#include <string_view>
#include <vector>

namespace certmount {

struct EmbeddedFile {
  std::string_view name;     // file name without directory, e.g. "0001_init.sql"
  std::string_view content;  // the file's bytes
};

// Every migrations/*.sql file, sorted by name. Lives for the whole process.
const std::vector<EmbeddedFile>& EmbeddedMigrations();

}  // namespace certmount
