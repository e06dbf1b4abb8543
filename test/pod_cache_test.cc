// kube::PodCache fed by hand as a Watcher would feed it: what it proves and
// what it leaves to a GET, relists, tombstones and their bound, and waiting
// for an answer on an injected clock.
#include "kube/pod_cache.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "support/fake_clock.h"

namespace certmount::kube {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

struct PodObject {
  std::string name;
  std::string uid;
  bool terminating = false;
  std::string phase = "Running";
};

std::string PodJson(const PodObject& pod) {
  json object = {{"apiVersion", "v1"},
                 {"kind", "Pod"},
                 {"metadata", {{"namespace", "ns"}, {"name", pod.name}, {"uid", pod.uid}}},
                 {"spec", {{"nodeName", "node-1"}}},
                 {"status", {{"phase", pod.phase}}}};
  if (pod.terminating) object["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:30Z";
  return object.dump();
}

PodRef Ref(const std::string& name, const std::string& uid) { return {"ns", name, uid}; }

void List(PodCache& cache, const std::vector<PodObject>& pods) {
  cache.OnListBoundary(ListBoundary::kBegin);
  for (const PodObject& pod : pods) cache.OnEvent({"ADDED", PodJson(pod)});
  cache.OnListBoundary(ListBoundary::kEnd);
}

TEST(PodCache, AnswersNothingBeforeTheFirstListEnds) {
  PodCache cache;
  EXPECT_FALSE(cache.synced());
  EXPECT_EQ(cache.Liveness(Ref("a", "uid-a")), std::nullopt);
  cache.OnListBoundary(ListBoundary::kBegin);
  cache.OnEvent({"ADDED", PodJson({"a", "uid-a"})});
  // Half a list proves nothing: the pod's later state may follow.
  EXPECT_EQ(cache.Liveness(Ref("a", "uid-a")), std::nullopt);
  cache.OnListBoundary(ListBoundary::kEnd);
  EXPECT_TRUE(cache.synced());
  EXPECT_EQ(cache.Liveness(Ref("a", "uid-a")), PodLiveness::kRunning);
}

TEST(PodCache, ClassifiesWhatTheWatchShows) {
  PodCache cache;
  List(cache, {{"run", "uid-run"},
               {"term", "uid-term", true},
               {"done", "uid-done", false, "Succeeded"},
               {"failed", "uid-failed", false, "Failed"}});
  EXPECT_EQ(cache.Liveness(Ref("run", "uid-run")), PodLiveness::kRunning);
  EXPECT_EQ(cache.Liveness(Ref("term", "uid-term")), PodLiveness::kTerminating);
  EXPECT_EQ(cache.Liveness(Ref("done", "uid-done")), PodLiveness::kFinished);
  EXPECT_EQ(cache.Liveness(Ref("failed", "uid-failed")), PodLiveness::kFinished);
  // Never seen: only a GET can tell.
  EXPECT_EQ(cache.Liveness(Ref("other", "uid-other")), std::nullopt);

  cache.OnEvent({"MODIFIED", PodJson({"run", "uid-run", true})});
  EXPECT_EQ(cache.Liveness(Ref("run", "uid-run")), PodLiveness::kTerminating);
  cache.OnEvent({"DELETED", PodJson({"run", "uid-run", true})});
  EXPECT_EQ(cache.Liveness(Ref("run", "uid-run")), PodLiveness::kGone);
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.tombstones(), 1u);
}

TEST(PodCache, ANameHoldingAnotherUidIsNotAnAnswerButADeletedUidIs) {
  PodCache cache;
  List(cache, {{"web-0", "uid-old"}});
  // The volume's pod is newer than the watch's last word about the name.
  EXPECT_EQ(cache.Liveness(Ref("web-0", "uid-new")), std::nullopt);
  // The recreation as the API server reports it: the old pod's DELETED,
  // then the new one's ADDED.
  cache.OnEvent({"DELETED", PodJson({"web-0", "uid-old", true})});
  cache.OnEvent({"ADDED", PodJson({"web-0", "uid-new"})});
  EXPECT_EQ(cache.Liveness(Ref("web-0", "uid-new")), PodLiveness::kRunning);
  EXPECT_EQ(cache.Liveness(Ref("web-0", "uid-old")), PodLiveness::kGone);
  // A late DELETED of the old UID leaves the new pod in place.
  cache.OnEvent({"DELETED", PodJson({"web-0", "uid-old", true})});
  EXPECT_EQ(cache.Liveness(Ref("web-0", "uid-new")), PodLiveness::kRunning);
}

TEST(PodCache, ARelistDropsVanishedPodsAsDeleted) {
  PodCache cache;
  List(cache, {{"a", "uid-a"}, {"b", "uid-b"}, {"c", "uid-c"}});
  // The watch was down (or expired) while b was deleted and c recreated.
  List(cache, {{"a", "uid-a"}, {"c", "uid-c2"}, {"d", "uid-d"}});
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.Liveness(Ref("a", "uid-a")), PodLiveness::kRunning);
  EXPECT_EQ(cache.Liveness(Ref("b", "uid-b")), PodLiveness::kGone);
  EXPECT_EQ(cache.Liveness(Ref("c", "uid-c")), PodLiveness::kGone);
  EXPECT_EQ(cache.Liveness(Ref("c", "uid-c2")), PodLiveness::kRunning);
  EXPECT_EQ(cache.Liveness(Ref("d", "uid-d")), PodLiveness::kRunning);
  EXPECT_EQ(cache.tombstones(), 2u);
}

TEST(PodCache, DuringARelistTheLastCompleteViewAnswers) {
  PodCache cache;
  List(cache, {{"a", "uid-a"}});
  cache.OnListBoundary(ListBoundary::kBegin);
  EXPECT_EQ(cache.Liveness(Ref("a", "uid-a")), PodLiveness::kRunning);
  cache.OnListBoundary(ListBoundary::kEnd);  // an empty list: a was deleted
  EXPECT_EQ(cache.Liveness(Ref("a", "uid-a")), PodLiveness::kGone);
}

TEST(PodCache, TombstonesAreBoundedOldestFirst) {
  PodCache cache(3);
  List(cache, {});
  for (int i = 0; i < 5; ++i) {
    const std::string uid = "uid-" + std::to_string(i);
    cache.OnEvent({"ADDED", PodJson({"p" + std::to_string(i), uid})});
    cache.OnEvent({"DELETED", PodJson({"p" + std::to_string(i), uid, true})});
  }
  EXPECT_EQ(cache.tombstones(), 3u);
  EXPECT_EQ(cache.size(), 0u);
  // The two oldest are forgotten: a GET answers for them again.
  EXPECT_EQ(cache.Liveness(Ref("p0", "uid-0")), std::nullopt);
  EXPECT_EQ(cache.Liveness(Ref("p1", "uid-1")), std::nullopt);
  for (int i = 2; i < 5; ++i) {
    EXPECT_EQ(cache.Liveness(Ref("p" + std::to_string(i), "uid-" + std::to_string(i))),
              PodLiveness::kGone);
  }
}

TEST(PodCache, AStoppedWatchNoLongerProvesRunningButFinalStatesStay) {
  PodCache cache;
  List(cache, {{"run", "uid-run"}, {"term", "uid-term", true}});
  cache.OnEvent({"DELETED", PodJson({"gone", "uid-gone", true})});
  cache.MarkUnsynced();
  EXPECT_FALSE(cache.synced());
  EXPECT_EQ(cache.Liveness(Ref("run", "uid-run")), std::nullopt);
  EXPECT_EQ(cache.Liveness(Ref("term", "uid-term")), PodLiveness::kTerminating);
  EXPECT_EQ(cache.Liveness(Ref("gone", "uid-gone")), PodLiveness::kGone);
}

TEST(PodCache, ObjectsThatAreNotPodsAreIgnored) {
  PodCache cache;
  List(cache, {{"a", "uid-a"}});
  cache.OnEvent({"ADDED", "not json"});
  cache.OnEvent({"DELETED", R"({"metadata":{"name":"a","namespace":"ns"}})"});
  cache.OnEvent({"ADDED", R"({"metadata":{"name":"a","namespace":"ns","uid":7}})"});
  EXPECT_EQ(cache.Liveness(Ref("a", "uid-a")), PodLiveness::kRunning);
  EXPECT_EQ(cache.tombstones(), 0u);
}

TEST(PodCache, WaitWakesAsSoonAsAnEventAnswers) {
  PodCache cache;
  List(cache, {});
  certmount::testing::FakeClock clock;
  // The fake clock never moves: only the event can end this wait.
  std::optional<PodLiveness> answer;
  std::thread waiter([&] {
    answer = cache.WaitForLiveness(Ref("new", "uid-new"), clock, clock.SteadyNow() + 1h, {});
  });
  cache.OnEvent({"ADDED", PodJson({"new", "uid-new"})});
  waiter.join();
  EXPECT_EQ(answer, PodLiveness::kRunning);
}

TEST(PodCache, WaitWakesWhenTheFirstListEnds) {
  PodCache cache;
  certmount::testing::FakeClock clock;
  std::optional<PodLiveness> answer;
  std::thread waiter([&] {
    answer = cache.WaitForLiveness(Ref("a", "uid-a"), clock, clock.SteadyNow() + 1h, {});
  });
  List(cache, {{"a", "uid-a"}});
  waiter.join();
  EXPECT_EQ(answer, PodLiveness::kRunning);
}

TEST(PodCache, WaitEndsAtItsBoundOrOnStop) {
  PodCache cache;
  List(cache, {});
  certmount::testing::FakeClock clock;
  // Already past the bound: answers at once, without waiting.
  EXPECT_EQ(cache.WaitForLiveness(Ref("a", "uid-a"), clock, clock.SteadyNow(), {}), std::nullopt);

  std::optional<PodLiveness> answer = PodLiveness::kRunning;
  const auto until = clock.SteadyNow() + 1s;
  std::thread waiter([&] { answer = cache.WaitForLiveness(Ref("a", "uid-a"), clock, until, {}); });
  clock.Advance(2s);  // noticed within one slice of the wait
  waiter.join();
  EXPECT_EQ(answer, std::nullopt);

  std::stop_source stop;
  answer = PodLiveness::kRunning;
  std::thread stopped([&] {
    answer =
        cache.WaitForLiveness(Ref("a", "uid-a"), clock, clock.SteadyNow() + 1h, stop.get_token());
  });
  stop.request_stop();
  stopped.join();
  EXPECT_EQ(answer, std::nullopt);
}

}  // namespace
}  // namespace certmount::kube
