#include "kube/rate_limiter.h"

#include <algorithm>

namespace certmount::kube {

RateLimiter::RateLimiter(double qps, int burst, const Clock* clock, Sleeper* sleeper)
    : limited_(qps > 0),
      burst_(std::max(1, burst)),
      clock_(clock),
      sleeper_(sleeper),
      bucket_(limited_ ? qps : 1.0, burst_, clock) {}

int RateLimiter::TokensAhead(ApiPriority priority, Line::const_iterator end) const {
  int tokens = 0;
  for (auto it = line_.begin(); it != end; ++it) {
    if ((*it)->priority <= priority) tokens += (*it)->tokens;
  }
  return tokens;
}

void RateLimiter::WakeLocked(Line::iterator from) {
  for (auto it = from; it != line_.end(); ++it) (*it)->wake.request_stop();
}

void RateLimiter::LeaveLocked(Line::iterator position) {
  line_.erase(position);
  WakeLocked(line_.begin());
}

Status RateLimiter::Acquire(int tokens, ApiPriority priority,
                            std::chrono::steady_clock::time_point deadline, std::stop_token stop) {
  if (!limited_ || tokens < 1) return Status::Ok();
  tokens = std::min(tokens, burst_);
  std::unique_lock lock(mutex_);
  const int ahead = TokensAhead(priority, line_.end());
  // Those ahead take their tokens first, each as soon as they are there.
  if (bucket_.AvailableAt(ahead + tokens) > deadline) {
    return Status::DeadlineExceeded("the client-side API rate limit would pass the deadline");
  }
  if (ahead == 0 && bucket_.TryTake(tokens)) return Status::Ok();
  const auto behind = std::find_if(line_.begin(), line_.end(), [priority](const Waiter* other) {
    return other->priority > priority;
  });
  Waiter waiter{tokens, priority, std::stop_source()};
  const Line::iterator position = line_.insert(behind, &waiter);
  // The turns of those it overtook moved back; some may now miss their
  // deadlines, which they should learn now rather than at their old turn.
  WakeLocked(behind);
  return WaitInLine(lock, position, deadline, stop);
}

Status RateLimiter::WaitInLine(std::unique_lock<std::mutex>& lock, Line::iterator position,
                               std::chrono::steady_clock::time_point deadline,
                               std::stop_token stop) {
  Waiter& self = **position;
  while (true) {
    const bool first = position == line_.begin();
    if (first && bucket_.TryTake(self.tokens)) {
      LeaveLocked(position);
      return Status::Ok();
    }
    const auto due = bucket_.AvailableAt(TokensAhead(self.priority, position) + self.tokens);
    if (clock_->SteadyNow() >= deadline) {
      LeaveLocked(position);
      return Status::DeadlineExceeded("deadline passed waiting for the client-side API rate limit");
    }
    if (due > deadline) {
      LeaveLocked(position);
      return Status::DeadlineExceeded(
          "callers of higher priority pushed the client-side API rate limit past the deadline");
    }
    // The first waits for its tokens; the others for the line to move, and
    // every move wakes them.
    const auto until = first ? due : deadline;
    const std::stop_token wake = self.wake.get_token();
    lock.unlock();
    {
      std::stop_callback forward(stop, [&self] { self.wake.request_stop(); });
      sleeper_->SleepUntil(until, wake);
    }
    lock.lock();
    if (stop.stop_requested()) {
      LeaveLocked(position);
      return Status::Cancelled("cancelled while waiting for the API rate limit");
    }
    // A change from now on wakes the fresh source; the old one has done its
    // job, since this waiter looks at everything again below.
    self.wake = std::stop_source();
  }
}

void RateLimiter::GiveBack(int tokens) {
  if (!limited_ || tokens < 1) return;
  std::lock_guard lock(mutex_);
  bucket_.GiveBack(tokens);
  WakeLocked(line_.begin());
}

}  // namespace certmount::kube
