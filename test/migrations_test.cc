// Migrations: the embedded files, schema/schema.sql agreeing with them, and the
// version rules applied at open.
#include "state/migrations.h"

#include <SQLiteCpp/SQLiteCpp.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <tuple>

#include "state/embedded_migrations.h"
#include "state/store.h"
#include "support/fake_clock.h"
#include "support/store_test_access.h"
#include "support/temp_dir.h"

namespace certmount {
namespace {

using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

// SQL text with comments removed and whitespace collapsed, so that
// schema/schema.sql may explain more than the migration files do. Quoted text
// is kept verbatim.
std::string NormaliseSql(const std::string& sql) {
  std::string out;
  bool pending_space = false;
  for (size_t i = 0; i < sql.size(); ++i) {
    const char c = sql[i];
    if (c == '\'' || c == '"') {
      const size_t end = sql.find(c, i + 1);
      if (pending_space && !out.empty()) out.push_back(' ');
      pending_space = false;
      out.append(sql, i, end == std::string::npos ? std::string::npos : end - i + 1);
      if (end == std::string::npos) break;
      i = end;
    } else if (c == '-' && i + 1 < sql.size() && sql[i + 1] == '-') {
      i = sql.find('\n', i);
      if (i == std::string::npos) break;
      pending_space = true;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      pending_space = true;
    } else {
      if (pending_space && !out.empty()) out.push_back(' ');
      pending_space = false;
      out.push_back(c);
    }
  }
  return out;
}

using SchemaEntry = std::tuple<std::string, std::string, std::string, std::string>;

std::vector<SchemaEntry> SchemaOf(SQLite::Database& db) {
  std::vector<SchemaEntry> entries;
  SQLite::Statement query(db,
                          "SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master "
                          "ORDER BY type, name");
  while (query.executeStep()) {
    entries.emplace_back(query.getColumn(0).getString(), query.getColumn(1).getString(),
                         query.getColumn(2).getString(),
                         NormaliseSql(query.getColumn(3).getString()));
  }
  return entries;
}

std::vector<Migration> MustParse(const std::vector<EmbeddedFile>& files) {
  auto parsed = ParseMigrations(files);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  return parsed.ok() ? *parsed : std::vector<Migration>{};
}

int UserVersion(const std::string& path) {
  SQLite::Database db(path, SQLite::OPEN_READONLY);
  return db.execAndGet("PRAGMA user_version").getInt();
}

TEST(NormaliseSqlTest, DropsCommentsAndCollapsesWhitespaceButKeepsStrings) {
  EXPECT_EQ(NormaliseSql("CREATE  TABLE t (\n  -- why\n  a TEXT DEFAULT '--  x'\n)"),
            "CREATE TABLE t ( a TEXT DEFAULT '--  x' )");
}

TEST(MigrationsTest, EmbeddedMigrationsAreValidAndStartWithInit) {
  const std::vector<Migration> migrations = MustParse(EmbeddedMigrations());
  ASSERT_FALSE(migrations.empty());
  EXPECT_EQ(migrations.front().version, 1);
  EXPECT_EQ(migrations.front().name, "0001_init.sql");
}

TEST(MigrationsTest, SchemaFileEqualsAllMigrationsApplied) {
  testing::TempDir dir;
  SQLite::Database migrated(dir.Sub("migrated.db"), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
  const std::vector<Migration> migrations = MustParse(EmbeddedMigrations());
  auto version = ApplyMigrations(migrated, migrations, "migrated.db");
  ASSERT_TRUE(version.ok()) << version.status().ToString();
  EXPECT_EQ(*version, migrations.back().version);

  SQLite::Database documented(dir.Sub("documented.db"),
                              SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
  const std::string schema_sql = ReadFile(CERTMOUNT_SOURCE_DIR "/schema/schema.sql");
  ASSERT_FALSE(schema_sql.empty());
  documented.exec(schema_sql);

  const std::vector<SchemaEntry> want = SchemaOf(migrated);
  EXPECT_GE(want.size(), 3u);  // table, its primary key index, index, view
  EXPECT_EQ(SchemaOf(documented), want)
      << "schema/schema.sql no longer matches migrations/*.sql; update it";
}

TEST(MigrationsTest, OpenRefusesNewerSchemaAndLeavesFileUntouched) {
  testing::TempDir dir;
  const std::string path = dir.Sub("state.db");
  testing::FakeClock clock;
  {
    auto store = Store::Open(path, clock);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    VolumeRecord volume;
    volume.volume_id = "v1";
    volume.target_path = "/t";
    ASSERT_TRUE(StoreTestAccess(**store).RegisterVolume(volume).ok());
  }
  const int known = MustParse(EmbeddedMigrations()).back().version;
  const int future = known + 5;
  {
    SQLite::Database db(path, SQLite::OPEN_READWRITE);
    db.exec("PRAGMA user_version = " + std::to_string(future));
  }
  const std::string before = ReadFile(path);

  auto store = Store::Open(path, clock);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Code::kFailedPrecondition);
  EXPECT_THAT(store.status().message(),
              HasSubstr("schema version " + std::to_string(future) +
                        ", this certmountd knows up to " + std::to_string(known)));
  EXPECT_THAT(store.status().message(), HasSubstr("upgrade certmountd"));
  EXPECT_EQ(ReadFile(path), before) << "refused open changed the file";
  EXPECT_EQ(UserVersion(path), future);
}

TEST(MigrationsTest, ReopenIsIdempotent) {
  testing::TempDir dir;
  const std::string path = dir.Sub("state.db");
  testing::FakeClock clock;
  std::vector<SchemaEntry> first_schema;
  {
    auto store = Store::Open(path, clock);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    EXPECT_EQ(StoreTestAccess(**store).schema_version(),
              MustParse(EmbeddedMigrations()).back().version);
    VolumeRecord volume;
    volume.volume_id = "v1";
    volume.target_path = "/t";
    ASSERT_TRUE(StoreTestAccess(**store).RegisterVolume(volume).ok());
  }
  {
    SQLite::Database db(path, SQLite::OPEN_READONLY);
    first_schema = SchemaOf(db);
  }
  for (int i = 0; i < 3; ++i) {
    auto store = Store::Open(path, clock);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    EXPECT_EQ(StoreTestAccess(**store).schema_version(),
              MustParse(EmbeddedMigrations()).back().version);
    auto volume = (*store)->GetVolume("v1");
    ASSERT_TRUE(volume.ok());
    EXPECT_TRUE(volume->has_value());
  }
  SQLite::Database db(path, SQLite::OPEN_READONLY);
  EXPECT_EQ(SchemaOf(db), first_schema);
}

TEST(MigrationsTest, ParseOrdersByVersion) {
  const std::vector<Migration> migrations =
      MustParse({{"0002_more.sql", "B"}, {"0001_init.sql", "A"}, {"0003_x_y2.sql", "C"}});
  ASSERT_EQ(migrations.size(), 3u);
  EXPECT_EQ(migrations[0].version, 1);
  EXPECT_EQ(migrations[0].sql, "A");
  EXPECT_EQ(migrations[1].version, 2);
  EXPECT_EQ(migrations[2].name, "0003_x_y2.sql");
}

TEST(MigrationsTest, ParseRejectsGapsDuplicatesAndWrongStart) {
  EXPECT_EQ(ParseMigrations({{"0001_a.sql", ""}, {"0003_c.sql", ""}}).status().code(),
            Code::kInternal);
  EXPECT_EQ(ParseMigrations({{"0001_a.sql", ""}, {"0001_b.sql", ""}}).status().code(),
            Code::kInternal);
  EXPECT_EQ(ParseMigrations({{"0002_b.sql", ""}}).status().code(), Code::kInternal);
  EXPECT_THAT(ParseMigrations({{"0001_a.sql", ""}, {"0003_c.sql", ""}}).status().message(),
              HasSubstr("0003_c.sql"));
}

TEST(MigrationsTest, ParseRejectsBadNames) {
  for (const char* name : {"1_init.sql", "0001-init.sql", "0001_init.txt", "0001_.sql",
                           "0001_Init.sql", "00001_init.sql", "0001_init.sql.bak"}) {
    auto parsed = ParseMigrations({{name, ""}});
    EXPECT_EQ(parsed.status().code(), Code::kInternal) << name;
    EXPECT_THAT(parsed.status().message(), HasSubstr(name));
  }
}

TEST(MigrationsTest, AppliesOnlyNewerMigrationsEachAtomically) {
  testing::TempDir dir;
  const std::string path = dir.Sub("state.db");
  SQLite::Database db(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
  const std::vector<Migration> v1 = MustParse({{"0001_a.sql", "CREATE TABLE a (x);"}});
  auto version = ApplyMigrations(db, v1, path);
  ASSERT_TRUE(version.ok()) << version.status().ToString();
  EXPECT_EQ(*version, 1);

  // 0002 fails halfway: its first statement must not survive.
  const std::vector<Migration> broken =
      MustParse({{"0001_a.sql", "CREATE TABLE a (x);"},
                 {"0002_b.sql", "CREATE TABLE b (y); INSERT INTO no_such_table VALUES (1);"}});
  auto failed = ApplyMigrations(db, broken, path);
  EXPECT_EQ(failed.status().code(), Code::kInternal);
  EXPECT_EQ(db.execAndGet("PRAGMA user_version").getInt(), 1);
  EXPECT_FALSE(db.tableExists("b"));

  // Re-running 0001 would fail (table a exists), so success proves it is skipped.
  const std::vector<Migration> v2 =
      MustParse({{"0001_a.sql", "CREATE TABLE a (x);"}, {"0002_b.sql", "CREATE TABLE b (y);"}});
  version = ApplyMigrations(db, v2, path);
  ASSERT_TRUE(version.ok()) << version.status().ToString();
  EXPECT_EQ(*version, 2);
  EXPECT_TRUE(db.tableExists("b"));
  EXPECT_EQ(db.execAndGet("PRAGMA user_version").getInt(), 2);
}

TEST(MigrationsTest, ApplyRefusesNewerDatabase) {
  testing::TempDir dir;
  const std::string path = dir.Sub("state.db");
  SQLite::Database db(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
  db.exec("PRAGMA user_version = 9");
  auto version = ApplyMigrations(db, MustParse({{"0001_a.sql", "CREATE TABLE a (x);"}}), path);
  EXPECT_EQ(version.status().code(), Code::kFailedPrecondition);
  EXPECT_FALSE(db.tableExists("a"));
}

}  // namespace
}  // namespace certmount
