// A test seam for parallel loops (solvers, block stream). A loop over a small test
// problem ends on the calling thread before a sleeping TBB worker wakes (on 2
// cores the worker took part in 0 of 1,124 Newton loops of test_solvers
// "[threads]"), so "the same bits for any thread count" tests would rarely
// see two threads at once. The test binaries set loop_rendezvous_microseconds
// (tests/test_main.cpp): the first task of a loop then waits up to that long
// for a task of the same loop to start on another thread. Elsewhere it stays
// 0 and a loop pays one relaxed load. Waiting changes no result: every task
// writes only its own outputs.
#pragma once

#include <atomic>
#include <chrono>
#include <thread>

namespace fgm {

inline std::atomic<int> loop_rendezvous_microseconds{0};

// One per parallel loop; arrive() at the start of each of its tasks.
class LoopRendezvous {
 public:
  // `parallel` false (a one-thread arena): arrive() never waits.
  explicit LoopRendezvous(bool parallel = true)
      : wait_(parallel ? loop_rendezvous_microseconds.load(std::memory_order_relaxed) : 0) {}

  void arrive() {
    if (wait_ <= 0) return;
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) != 0) return;  // only the first task waits
    // The first task holds its thread, so a second arrival comes from another thread.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(wait_);
    while (arrived_.load(std::memory_order_acquire) < 2 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
  }

 private:
  int wait_;
  std::atomic<int> arrived_{0};
};

}  // namespace fgm
