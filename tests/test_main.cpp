#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include "core/loop_rendezvous.h"

// Parallel loops (solvers, block stream) over small test problems wait up to
// 2 ms for a second thread (core/loop_rendezvous.h), so the thread-count tests
// run their tasks on two threads at once. On 2 cores oneTBB keeps one worker
// per process; a 3- or 4-slot arena made after a 2-slot one prints "TBB
// Warning: The number of workers is currently limited to 1" and runs on 2
// threads. Under a 1-CPU affinity mask it says "limited to 0" and every arena
// runs on its calling thread alone: tests/core/test_loop_rendezvous.cpp fails.
static const bool kLoopRendezvousSet = (fgm::loop_rendezvous_microseconds = 2000, true);
