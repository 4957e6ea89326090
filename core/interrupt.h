// Cooperative interruption: the Python binding turns Ctrl-C into
// request_interrupt() from its waiting thread; the long loops call
// check_interrupt() at their safe points (every streamed block, every
// subproblem iteration, every ingested chunk), which throws Interrupted, so
// the command unwinds as it does on any error (reservations released,
// temporaries removed, no partial output). The command line never requests it.
#pragma once

#include <atomic>
#include <exception>

namespace fgm {

class Interrupted : public std::exception {
 public:
  const char* what() const noexcept override { return "interrupted"; }
};

std::atomic<bool>& interrupt_flag();

inline void request_interrupt() { interrupt_flag().store(true, std::memory_order_relaxed); }
inline void clear_interrupt() { interrupt_flag().store(false, std::memory_order_relaxed); }
inline void check_interrupt() {
  if (interrupt_flag().load(std::memory_order_relaxed)) throw Interrupted();
}

}  // namespace fgm
