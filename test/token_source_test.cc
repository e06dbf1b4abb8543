// The service-account token file is read through the Env: a rotation by
// kubelet (a new file swapped in) is picked up, and a read that fails is an
// error that never falls back to the last token or names it.
#include "kube/token_source.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>
#include <fstream>

#include "support/fault_env.h"
#include "support/temp_dir.h"

namespace certmount::kube {
namespace {

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// As kubelet does: the new token goes to a new file renamed over the old.
void Rotate(const std::string& path, const std::string& text) {
  WriteText(path + ".new", text);
  std::filesystem::rename(path + ".new", path);
}

TEST(TokenSourceTest, FixedTokenWithoutAFile) {
  TokenSource tokens("fixed", "", Env::Default());
  Result<std::string> token = tokens.Token();
  ASSERT_TRUE(token.ok());
  EXPECT_EQ(*token, "fixed");
}

TEST(TokenSourceTest, RotatedFileIsReadAgainAndAnUnchangedOneIsNot) {
  testing::TempDir dir;
  const std::string path = dir.Sub("token");
  WriteText(path, "first\n");
  testing::FaultInjectionEnv env;
  TokenSource tokens("", path, &env);
  EXPECT_EQ(*tokens.Token(), "first");
  EXPECT_EQ(*tokens.Token(), "first");
  EXPECT_EQ(env.calls("ReadFile"), 1);  // the second call only stat'ed
  Rotate(path, "second");
  EXPECT_EQ(*tokens.Token(), "second");
  EXPECT_EQ(env.calls("ReadFile"), 2);
}

TEST(TokenSourceTest, FailedReadIsAnErrorWithoutTheOldToken) {
  testing::TempDir dir;
  const std::string path = dir.Sub("token");
  WriteText(path, "secret-one");
  testing::FaultInjectionEnv env;
  TokenSource tokens("", path, &env);
  ASSERT_EQ(*tokens.Token(), "secret-one");
  Rotate(path, "secret-two");
  env.FailNth("ReadFile", 1, EIO);
  Result<std::string> token = tokens.Token();
  ASSERT_FALSE(token.ok());
  EXPECT_EQ(token.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(token.status().message().find("EIO"), std::string::npos) << token.status().message();
  EXPECT_EQ(token.status().message().find("secret"), std::string::npos);
  // The fault was one read: the next call reads the rotated file.
  EXPECT_EQ(*tokens.Token(), "secret-two");
}

TEST(TokenSourceTest, FailedStatIsAnError) {
  testing::TempDir dir;
  const std::string path = dir.Sub("token");
  WriteText(path, "t");
  testing::FaultInjectionEnv env;
  TokenSource tokens("", path, &env);
  env.FailNth("Stat", 1, EACCES);
  EXPECT_EQ(tokens.Token().status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(*tokens.Token(), "t");
}

}  // namespace
}  // namespace certmount::kube
