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

TEST(TokenBucketTest, ReservationsQueueBehindEachOther) {
  testing::FakeClock clock;
  TokenBucket bucket(1.0, 1, &clock);
  const auto start = clock.SteadyNow();
  // The one token there, then each reservation a second after the last.
  EXPECT_EQ(bucket.Reserve(), start);
  EXPECT_EQ(bucket.Reserve(), start + 1s);
  EXPECT_EQ(bucket.Reserve(), start + 2s);
  EXPECT_EQ(bucket.NextTokenAt(), start + 3s);
  EXPECT_FALSE(bucket.TryTake());
  // Once the owed tokens have come in, the bucket serves again.
  clock.Advance(3s);
  EXPECT_TRUE(bucket.TryTake());
  EXPECT_FALSE(bucket.TryTake());
}

TEST(TokenBucketTest, AnUnreservedTokenGoesToTheNextCaller) {
  testing::FakeClock clock;
  TokenBucket bucket(1.0, 1, &clock);
  const auto start = clock.SteadyNow();
  ASSERT_TRUE(bucket.TryTake());
  EXPECT_EQ(bucket.Reserve(), start + 1s);
  bucket.Unreserve();  // that waiter gave up
  EXPECT_EQ(bucket.Reserve(), start + 1s);
}

TEST(TokenBucketTest, UnreserveNeverFillsPastTheBurst) {
  testing::FakeClock clock;
  TokenBucket bucket(1.0, 2, &clock);
  bucket.Unreserve();
  bucket.Unreserve();
  int taken = 0;
  while (bucket.TryTake()) ++taken;
  EXPECT_EQ(taken, 2);
}

}  // namespace
}  // namespace certmount
