// The token bucket every rate limit of the driver uses, on a fake clock.
#include "common/token_bucket.h"

#include <gtest/gtest.h>

#include "support/fake_clock.h"

namespace certmount {
namespace {

using namespace std::chrono_literals;

TEST(TokenBucketTest, AllowsBurstThenRate) {
  testing::FakeClock clock;
  TokenBucket bucket(2.0, 3, &clock);
  int taken = 0;
  while (bucket.TryTake()) ++taken;
  EXPECT_EQ(taken, 3);
  EXPECT_EQ(bucket.NextTokenAt(), clock.SteadyNow() + 500ms);
  clock.Advance(1s);
  EXPECT_TRUE(bucket.TryTake());
  EXPECT_TRUE(bucket.TryTake());
  EXPECT_FALSE(bucket.TryTake());
  clock.Advance(100s);  // refills only up to the burst
  taken = 0;
  while (bucket.TryTake()) ++taken;
  EXPECT_EQ(taken, 3);
}

TEST(TokenBucketTest, SeveralTokensAreTakenTogetherOrNotAtAll) {
  testing::FakeClock clock;
  TokenBucket bucket(1.0, 3, &clock);
  ASSERT_TRUE(bucket.TryTake(2));
  EXPECT_FALSE(bucket.TryTake(2));  // one left: not enough, and it stays
  EXPECT_TRUE(bucket.TryTake(1));
  EXPECT_FALSE(bucket.TryTake(1));
  clock.Advance(2s);
  EXPECT_TRUE(bucket.TryTake(2));
}

TEST(TokenBucketTest, AvailableAtCountsPastTheBurstForALineOfTakers) {
  testing::FakeClock clock;
  TokenBucket bucket(2.0, 2, &clock);
  const auto start = clock.SteadyNow();
  EXPECT_EQ(bucket.AvailableAt(2), start);
  // Two there now, then two a second: a line wanting 2 + 2 + 2 tokens is
  // served by start + 2s, although the bucket never holds more than 2.
  EXPECT_EQ(bucket.AvailableAt(6), start + 2s);
  ASSERT_TRUE(bucket.TryTake(2));
  EXPECT_EQ(bucket.AvailableAt(1), start + 500ms);
  EXPECT_EQ(bucket.NextTokenAt(), start + 500ms);
  EXPECT_EQ(bucket.AvailableAt(4), start + 2s);
  // Asking takes nothing.
  clock.Advance(1s);
  EXPECT_TRUE(bucket.TryTake(2));
}

TEST(TokenBucketTest, GivenBackTokensAreThereAtOnce) {
  testing::FakeClock clock;
  TokenBucket bucket(1.0, 3, &clock);
  ASSERT_TRUE(bucket.TryTake(3));
  EXPECT_FALSE(bucket.TryTake(1));
  bucket.GiveBack(2);
  EXPECT_EQ(bucket.AvailableAt(2), clock.SteadyNow());
  EXPECT_TRUE(bucket.TryTake(2));
  EXPECT_FALSE(bucket.TryTake(1));
}

TEST(TokenBucketTest, GiveBackNeverFillsPastTheBurst) {
  testing::FakeClock clock;
  TokenBucket bucket(1.0, 2, &clock);
  bucket.GiveBack(1);
  bucket.GiveBack(5);
  int taken = 0;
  while (bucket.TryTake()) ++taken;
  EXPECT_EQ(taken, 2);
}

TEST(TokenBucketTest, ARefusedMultiTokenTakeIsAWaitUntilATakeSucceeds) {
  testing::FakeClock clock;
  TokenBucket bucket(1.0, 2, &clock);
  ASSERT_TRUE(bucket.TryTake(1));
  EXPECT_FALSE(bucket.TryTake(2));
  EXPECT_EQ(bucket.waits(), 1);
  clock.Advance(1s);
  EXPECT_TRUE(bucket.TryTake(2));
  EXPECT_EQ(bucket.waits(), 1);
  EXPECT_EQ(bucket.waited().count(), 1);
  // Giving back neither begins nor ends a wait.
  bucket.GiveBack(1);
  EXPECT_EQ(bucket.waits(), 1);
}

}  // namespace
}  // namespace certmount
