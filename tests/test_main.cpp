#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include "core/loop_rendezvous.h"

// The solvers' parallel loops over small test problems wait up to 2 ms for a
// second thread (core/loop_rendezvous.h), so the thread-count tests run their
// tasks on two threads at once. On this 2-core machine oneTBB keeps one worker
// per process; a 3- or 4-slot arena made after a 2-slot one prints "TBB
// Warning: The number of workers is currently limited to 1" and runs on 2
// threads (tests/core/test_loop_rendezvous.cpp).
static const bool kLoopRendezvousSet = (fgm::loop_rendezvous_microseconds = 2000, true);
