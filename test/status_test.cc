// Status::WithContext: one separator between each context and the message.
#include "common/status.h"

#include <gtest/gtest.h>

namespace certmount {
namespace {

TEST(StatusTest, WithContextPutsOneSeparatorBeforeTheMessage) {
  const Status failed = Status::NotFound("no such pod");

  const Status plain = failed.WithContext("reading pod ns/a");
  EXPECT_EQ(plain.code(), Code::kNotFound);
  EXPECT_EQ(plain.message(), "reading pod ns/a: no such pod");

  // Nested contexts read outermost first.
  EXPECT_EQ(failed.WithContext("no time left to retry").WithContext("creating x").message(),
            "creating x: no time left to retry: no such pod");
}

TEST(StatusTest, WithContextKeepsOkAndIgnoresAnEmptyContext) {
  EXPECT_TRUE(Status::Ok().WithContext("anything").ok());
  EXPECT_EQ(Status::Internal("boom").WithContext("").message(), "boom");
}

}  // namespace
}  // namespace certmount
