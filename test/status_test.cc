// Status::WithContext: one separator between context and message, whatever
// the caller wrote.
#include "common/status.h"

#include <gtest/gtest.h>

namespace certmount {
namespace {

TEST(StatusTest, WithContextPutsOneSeparatorBeforeTheMessage) {
  const Status failed = Status::NotFound("no such pod");

  const Status plain = failed.WithContext("reading pod ns/a");
  EXPECT_EQ(plain.code(), Code::kNotFound);
  EXPECT_EQ(plain.message(), "reading pod ns/a: no such pod");

  // Callers that end their context with the separator get it once.
  EXPECT_EQ(failed.WithContext("reading pod ns/a: ").message(), "reading pod ns/a: no such pod");
  EXPECT_EQ(failed.WithContext("no time left to retry: ").WithContext("creating x").message(),
            "creating x: no time left to retry: no such pod");
}

TEST(StatusTest, WithContextKeepsOkAndIgnoresAnEmptyContext) {
  EXPECT_TRUE(Status::Ok().WithContext("anything").ok());
  EXPECT_EQ(Status::Internal("boom").WithContext("").message(), "boom");
}

}  // namespace
}  // namespace certmount
