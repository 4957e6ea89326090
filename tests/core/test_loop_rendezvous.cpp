// The thread-count tests are only as strong as the threads they get: a 2-slot
// task arena in a test binary must run two threads at once (no
// tbb::global_control limit, an affinity mask of at least 2 CPUs, a TBB
// worker), and core/loop_rendezvous.h must bring a second thread into a loop
// of tasks too small to wake one otherwise. Waits end on the other thread's
// arrival; the timeout is generous and only a missing thread reaches it.
#include <catch2/catch.hpp>
#include <sched.h>

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "core/loop_rendezvous.h"

namespace fgm {
namespace {

constexpr auto kArrivalTimeout = std::chrono::seconds(60);

// Sets the rendezvous wait for one scope (the test main sets 2 ms).
class RendezvousWait {
 public:
  explicit RendezvousWait(int microseconds) : saved_(loop_rendezvous_microseconds.exchange(microseconds)) {}
  ~RendezvousWait() { loop_rendezvous_microseconds = saved_; }

 private:
  int saved_;
};

// CPUs this process may run on. With one (a 1-CPU container, `taskset -c 0`)
// oneTBB starts no worker and no test here can see two threads: the tests
// below say so (a warning in the test output) instead of failing.
int allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
}

bool two_cpus_or_warn() {
  if (allowed_cpus() >= 2) return true;
  WARN("this process may run on " << allowed_cpus()
                                  << " CPU: oneTBB gives it no worker, so the thread-count tests run serially here");
  return false;
}

struct ThreadLog {
  std::mutex mutex;
  std::set<std::thread::id> ids;
  void add() {
    std::lock_guard<std::mutex> lock(mutex);
    ids.insert(std::this_thread::get_id());
  }
};

TEST_CASE("A 2-slot task arena of the test binaries runs two threads at once", "[core][threads]") {
  if (!two_cpus_or_warn()) return;
  tbb::task_arena arena(2);
  ThreadLog log;
  std::atomic<int> arrived{0};
  bool met = true;
  arena.execute([&] {
    tbb::parallel_for(0, 2, [&](int) {
      log.add();
      // The first task holds its thread until another thread starts the second.
      if (arrived.fetch_add(1) != 0) return;
      const auto deadline = std::chrono::steady_clock::now() + kArrivalTimeout;
      while (arrived.load() < 2)
        if (std::chrono::steady_clock::now() > deadline) {
          met = false;
          return;
        } else {
          std::this_thread::yield();
        }
    }, tbb::simple_partitioner());
  });
  INFO("oneTBB gave this process no worker thread although it may run on " << allowed_cpus()
       << " CPUs (a tbb::global_control limit?): the thread-count tests here would run serially");
  REQUIRE(met);
  REQUIRE(log.ids.size() == 2);
}

// Tiny tasks: without the rendezvous the calling thread usually runs them all.
TEST_CASE("A loop's rendezvous brings a second thread into a loop of tiny tasks", "[core][threads]") {
  if (!two_cpus_or_warn()) return;
  tbb::task_arena arena(2);
  const RendezvousWait wait(static_cast<int>(std::chrono::microseconds(kArrivalTimeout).count()));
  for (int loop = 0; loop < 20; ++loop) {
    ThreadLog log;
    LoopRendezvous rendezvous;
    std::atomic<int> tasks{0};
    arena.execute([&] {
      tbb::parallel_for(0, 64, [&](int) {
        rendezvous.arrive();
        log.add();
        ++tasks;
      });
    });
    CAPTURE(loop);
    REQUIRE(tasks == 64);
    REQUIRE(log.ids.size() == 2);
  }
}

// Alone on its thread a loop waits once, for its wait, then runs through.
TEST_CASE("A loop's rendezvous waits at most its wait, on the first task only", "[core][threads]") {
  REQUIRE(loop_rendezvous_microseconds > 0);  // set by tests/test_main.cpp for every test binary
  const RendezvousWait wait(100000);
  LoopRendezvous rendezvous;
  const auto start = std::chrono::steady_clock::now();
  for (int task = 0; task < 1000; ++task) rendezvous.arrive();
  const auto elapsed = std::chrono::steady_clock::now() - start;
  REQUIRE(elapsed >= std::chrono::milliseconds(100));
  REQUIRE(elapsed < std::chrono::seconds(30));  // a wait per task would take 100 s
}

}  // namespace
}  // namespace fgm
