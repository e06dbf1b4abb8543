// The API server rate limit's line: priorities, all-or-nothing multi-token
// takes, deadlines known at once, cancellation and tokens given back. The
// fake clock moves only when a test moves it; waiters block in a sleeper
// the test steps, so every order below is decided by the limiter alone.
#include "kube/rate_limiter.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/fake_clock.h"

namespace certmount::kube {
namespace {

using namespace std::chrono_literals;

// Blocks each caller until the test has moved the clock to its time or its
// stop is requested, and keeps what the test waits on: how many callers are
// asleep and which have finished, in order.
class SteppedSleeper final : public Sleeper {
 public:
  explicit SteppedSleeper(testing::FakeClock* clock) : clock_(clock) {}

  bool SleepUntil(std::chrono::steady_clock::time_point until, std::stop_token stop) override {
    std::unique_lock lock(mutex_);
    ++asleep_;
    ++sleeps_;
    changed_.notify_all();
    const bool reached = changed_.wait(lock, stop, [&] { return clock_->SteadyNow() >= until; });
    --asleep_;
    changed_.notify_all();
    return reached;
  }

  void Advance(std::chrono::seconds delta) {
    std::lock_guard lock(mutex_);
    clock_->Advance(delta);
    changed_.notify_all();
  }

  void Finished(const std::string& name, Status status) {
    std::lock_guard lock(mutex_);
    finished_.push_back(name);
    results_.emplace(name, std::move(status));
    changed_.notify_all();
  }

  // Waits (a minute at most, so that a broken limiter fails rather than
  // hangs) until exactly `asleep` callers sleep and `finished` have finished.
  bool WaitFor(int asleep, size_t finished) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, 60s,
                             [&] { return asleep_ == asleep && finished_.size() == finished; });
  }

  std::vector<std::string> finished() {
    std::lock_guard lock(mutex_);
    return finished_;
  }
  Status result(const std::string& name) {
    std::lock_guard lock(mutex_);
    return results_.at(name);
  }
  int sleeps() {
    std::lock_guard lock(mutex_);
    return sleeps_;
  }

 private:
  testing::FakeClock* clock_;
  std::mutex mutex_;
  std::condition_variable_any changed_;
  int asleep_ = 0;
  int sleeps_ = 0;
  std::vector<std::string> finished_;
  std::map<std::string, Status> results_;
};

class RateLimiterLineTest : public ::testing::Test {
 protected:
  // One token a second, as the tests below count.
  void MakeLimiter(int burst) {
    limiter_ = std::make_unique<RateLimiter>(/*qps=*/1, burst, &clock_, &sleeper_);
  }

  // Starts a caller in its own thread, recording its Status as `name`. The
  // thread's stop token is the caller's: requesting it cancels the caller,
  // and ending the test does so for any still waiting.
  std::jthread& Start(const std::string& name, int tokens, ApiPriority priority,
                      std::chrono::seconds timeout = 60s) {
    const auto deadline = clock_.SteadyNow() + timeout;
    return callers_.emplace_back([this, name, tokens, priority, deadline](std::stop_token stop) {
      sleeper_.Finished(name, limiter_->Acquire(tokens, priority, deadline, stop));
    });
  }

  // Takes every token there is, so that what follows queues.
  void Drain(int burst) {
    ASSERT_TRUE(limiter_->Acquire(burst, ApiPriority::kWatch, clock_.SteadyNow(), {}).ok());
  }

  testing::FakeClock clock_;
  SteppedSleeper sleeper_{&clock_};
  std::unique_ptr<RateLimiter> limiter_;
  // Joined before the limiter and the sleeper go (declared after them).
  std::list<std::jthread> callers_;
};

TEST_F(RateLimiterLineTest, AMultiTokenAcquireThatWouldMissItsDeadlineFailsAtOnceTakingNothing) {
  MakeLimiter(/*burst=*/3);
  ASSERT_TRUE(limiter_->Acquire(2, ApiPriority::kPublish, clock_.SteadyNow(), {}).ok());
  // One token is left; three would take two seconds more.
  Status status = limiter_->Acquire(3, ApiPriority::kPublish, clock_.SteadyNow() + 1s, {});
  EXPECT_EQ(status.code(), Code::kDeadlineExceeded) << status.ToString();
  EXPECT_EQ(sleeper_.sleeps(), 0);
  // The token left is still there: a deadline of now is met.
  EXPECT_TRUE(limiter_->Acquire(1, ApiPriority::kBackground, clock_.SteadyNow(), {}).ok());
  EXPECT_EQ(sleeper_.sleeps(), 0);
  EXPECT_EQ(limiter_->Acquire(1, ApiPriority::kWatch, clock_.SteadyNow(), {}).code(),
            Code::kDeadlineExceeded);
}

TEST_F(RateLimiterLineTest, MoreTokensThanTheBurstCountAsTheBurst) {
  MakeLimiter(/*burst=*/2);
  EXPECT_EQ(limiter_->burst(), 2);
  EXPECT_TRUE(limiter_->Acquire(5, ApiPriority::kPublish, clock_.SteadyNow(), {}).ok());
  EXPECT_EQ(limiter_->Acquire(1, ApiPriority::kPublish, clock_.SteadyNow(), {}).code(),
            Code::kDeadlineExceeded);
}

TEST_F(RateLimiterLineTest, TheWaitersAheadCountAgainstANewcomersDeadline) {
  MakeLimiter(/*burst=*/2);
  Drain(2);
  Start("first", 2, ApiPriority::kPublish);
  ASSERT_TRUE(sleeper_.WaitFor(1, 0));
  // Two seconds for the first's two tokens, a third for this one's.
  EXPECT_EQ(limiter_->Acquire(1, ApiPriority::kPublish, clock_.SteadyNow() + 2s, {}).code(),
            Code::kDeadlineExceeded);
  EXPECT_EQ(sleeper_.sleeps(), 1);
  // A newcomer of higher priority does not count them: it goes first.
  Start("watch", 1, ApiPriority::kWatch, /*timeout=*/1s);
  ASSERT_TRUE(sleeper_.WaitFor(2, 0));
  sleeper_.Advance(1s);
  ASSERT_TRUE(sleeper_.WaitFor(1, 1));
  EXPECT_TRUE(sleeper_.result("watch").ok());
  sleeper_.Advance(2s);
  ASSERT_TRUE(sleeper_.WaitFor(0, 2));
  EXPECT_TRUE(sleeper_.result("first").ok());
}

struct Overtaking {
  ApiPriority earlier;
  ApiPriority later;
};

class RateLimiterPriorityTest : public RateLimiterLineTest,
                                public ::testing::WithParamInterface<Overtaking> {};

TEST_P(RateLimiterPriorityTest, AHigherPriorityIsServedBeforeALowerOneThatCameEarlier) {
  MakeLimiter(/*burst=*/1);
  Drain(1);
  Start("earlier", 1, GetParam().earlier);
  ASSERT_TRUE(sleeper_.WaitFor(1, 0));
  Start("later", 1, GetParam().later);
  ASSERT_TRUE(sleeper_.WaitFor(2, 0));
  sleeper_.Advance(1s);
  ASSERT_TRUE(sleeper_.WaitFor(1, 1));
  EXPECT_EQ(sleeper_.finished(), std::vector<std::string>{"later"});
  sleeper_.Advance(1s);
  ASSERT_TRUE(sleeper_.WaitFor(0, 2));
  EXPECT_EQ(sleeper_.finished(), (std::vector<std::string>{"later", "earlier"}));
  EXPECT_TRUE(sleeper_.result("earlier").ok());
}

INSTANTIATE_TEST_SUITE_P(
    Priorities, RateLimiterPriorityTest,
    ::testing::Values(Overtaking{ApiPriority::kPublish, ApiPriority::kWatch},
                      Overtaking{ApiPriority::kBackground, ApiPriority::kPublish},
                      Overtaking{ApiPriority::kBackground, ApiPriority::kWatch}));

TEST_F(RateLimiterLineTest, OnePriorityIsServedInArrivalOrder) {
  MakeLimiter(/*burst=*/1);
  Drain(1);
  const std::vector<std::string> names = {"a", "b", "c"};
  for (size_t i = 0; i < names.size(); ++i) {
    Start(names[i], 1, ApiPriority::kPublish);
    ASSERT_TRUE(sleeper_.WaitFor(static_cast<int>(i) + 1, 0));
  }
  for (size_t i = 0; i < names.size(); ++i) {
    sleeper_.Advance(1s);
    ASSERT_TRUE(sleeper_.WaitFor(static_cast<int>(names.size() - i - 1), i + 1));
  }
  EXPECT_EQ(sleeper_.finished(), names);
}

TEST_F(RateLimiterLineTest, ALowerPriorityNeverTakesTokensTheFirstWaiterNeeds) {
  MakeLimiter(/*burst=*/2);
  Drain(2);
  Start("publish", 2, ApiPriority::kPublish);
  ASSERT_TRUE(sleeper_.WaitFor(1, 0));
  Start("background", 1, ApiPriority::kBackground);
  ASSERT_TRUE(sleeper_.WaitFor(2, 0));
  // One token is there: enough for the background call, not for the
  // publish ahead of it, which must not be delayed by it.
  sleeper_.Advance(1s);
  ASSERT_TRUE(sleeper_.WaitFor(2, 0));
  sleeper_.Advance(1s);
  ASSERT_TRUE(sleeper_.WaitFor(1, 1));
  EXPECT_EQ(sleeper_.finished(), std::vector<std::string>{"publish"});
  sleeper_.Advance(1s);
  ASSERT_TRUE(sleeper_.WaitFor(0, 2));
}

TEST_F(RateLimiterLineTest, AHigherPriorityArrivalCanPushAWaiterPastItsDeadline) {
  MakeLimiter(/*burst=*/1);
  Drain(1);
  Start("background", 1, ApiPriority::kBackground, /*timeout=*/1s);
  ASSERT_TRUE(sleeper_.WaitFor(1, 0));
  Start("watch", 1, ApiPriority::kWatch);
  // The background call learns at once that its turn is now after its
  // deadline, and leaves the line without waiting for it.
  ASSERT_TRUE(sleeper_.WaitFor(1, 1));
  EXPECT_EQ(sleeper_.result("background").code(), Code::kDeadlineExceeded);
  sleeper_.Advance(1s);
  ASSERT_TRUE(sleeper_.WaitFor(0, 2));
  EXPECT_TRUE(sleeper_.result("watch").ok());
}

TEST_F(RateLimiterLineTest, ACancelledWaiterTakesNothing) {
  MakeLimiter(/*burst=*/1);
  Drain(1);
  std::jthread& cancelled = Start("cancelled", 1, ApiPriority::kWatch);
  ASSERT_TRUE(sleeper_.WaitFor(1, 0));
  Start("next", 1, ApiPriority::kBackground);
  ASSERT_TRUE(sleeper_.WaitFor(2, 0));
  cancelled.request_stop();
  ASSERT_TRUE(sleeper_.WaitFor(1, 1));
  EXPECT_EQ(sleeper_.result("cancelled").code(), Code::kCancelled);
  // The first token goes to the caller behind it.
  sleeper_.Advance(1s);
  ASSERT_TRUE(sleeper_.WaitFor(0, 2));
  EXPECT_TRUE(sleeper_.result("next").ok());
}

TEST_F(RateLimiterLineTest, TokensGivenBackServeTheFirstWaiterAtOnce) {
  MakeLimiter(/*burst=*/2);
  Drain(2);
  Start("waiter", 2, ApiPriority::kPublish);
  ASSERT_TRUE(sleeper_.WaitFor(1, 0));
  limiter_->GiveBack(2);
  ASSERT_TRUE(sleeper_.WaitFor(0, 1));
  EXPECT_TRUE(sleeper_.result("waiter").ok());
  // The clock never moved: the tokens it got were the ones given back.
  EXPECT_EQ(limiter_->Acquire(1, ApiPriority::kWatch, clock_.SteadyNow(), {}).code(),
            Code::kDeadlineExceeded);
}

TEST_F(RateLimiterLineTest, NoQpsMeansNoLimitWhateverTheTokens) {
  RateLimiter limiter(/*qps=*/0, /*burst=*/1, &clock_, &sleeper_);
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(limiter.Acquire(5, ApiPriority::kBackground, clock_.SteadyNow(), {}).ok());
  }
  EXPECT_EQ(sleeper_.sleeps(), 0);
}

}  // namespace
}  // namespace certmount::kube
