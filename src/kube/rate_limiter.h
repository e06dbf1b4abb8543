// The client-side limit on requests to the API server (qps and burst, as
// client-go has them), so that a node full of renewals cannot flood it, with
// priorities, so that the calls that matter most are not stuck behind the
// rest when the limit is tight.
#pragma once

#include <chrono>
#include <list>
#include <mutex>
#include <stop_token>

#include "common/clock.h"
#include "common/status.h"
#include "common/token_bucket.h"
#include "kube/sleeper.h"

namespace certmount::kube {

// Who gets the next tokens, highest first.
enum class ApiPriority {
  // Lists and watches: their results are what publishes and renewals wait
  // for (a CertificateRequest's outcome), so they never queue behind them.
  kWatch,
  // Work a pod's start is waiting for.
  kPublish,
  // Everything else: renewals, cleanup.
  kBackground,
};

class RateLimiter {
 public:
  // Refills `qps` tokens a second up to `burst` (at least 1); starts full. A
  // `qps` <= 0 disables the limit. `clock` and `sleeper` must outlive it.
  RateLimiter(double qps, int burst, const Clock* clock, Sleeper* sleeper);

  // Takes `tokens` tokens together, or none. More than burst() counts as
  // burst() (more could never be there at once); fewer than 1 is OK at once.
  // Waiters are served highest priority first, in arrival order within a
  // priority, and one that cannot be served yet holds no tokens while it
  // waits, so it delays nobody ahead of it. Returns
  //  - OK with the tokens taken;
  //  - DEADLINE_EXCEEDED at once, without waiting, when the waiters already
  //    queued at this priority or a higher one plus the refill rate put the
  //    grant after `deadline`;
  //  - DEADLINE_EXCEEDED when, while it waits, `deadline` passes or waiters
  //    of higher priority that came later push the grant past it;
  //  - CANCELLED when `stop` is requested while it waits.
  // Taking nothing on any error. With no limit, always OK. Thread-safe.
  Status Acquire(int tokens, ApiPriority priority, std::chrono::steady_clock::time_point deadline,
                 std::stop_token stop);

  // Puts back `tokens` taken by Acquire and never used for a request (up to
  // the burst), for the waiters. Thread-safe.
  void GiveBack(int tokens);

  // The most tokens one Acquire takes.
  int burst() const { return burst_; }

 private:
  struct Waiter {
    int tokens;
    ApiPriority priority;
    // Requested to end the waiter's sleep early when the line or the bucket
    // changed, so it looks again; replaced (under mutex_) before each look.
    std::stop_source wake;
  };
  using Line = std::list<Waiter*>;

  // The tokens the waiters of `priority` or higher need in all, ahead of a
  // newcomer of `priority` (`end`: the whole line) or of the waiter at `end`.
  int TokensAhead(ApiPriority priority, Line::const_iterator end) const;
  // Makes the waiters from `from` to the end of the line look at the line
  // and the bucket again.
  void WakeLocked(Line::iterator from);
  // Takes the waiter at `position` out of the line; the first may now take
  // its tokens and the others' turns moved, so all of them look again.
  void LeaveLocked(Line::iterator position);
  // Waits in line at `position` until the tokens are taken or an error.
  Status WaitInLine(std::unique_lock<std::mutex>& lock, Line::iterator position,
                    std::chrono::steady_clock::time_point deadline, std::stop_token stop);

  const bool limited_;
  const int burst_;
  const Clock* clock_;
  Sleeper* sleeper_;
  std::mutex mutex_;
  TokenBucket bucket_;
  // Highest priority first, arrival order within one; the front one alone
  // may take tokens.
  Line line_;
};

}  // namespace certmount::kube
