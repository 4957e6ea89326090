#include "core/interrupt.h"

namespace fgm {

std::atomic<bool>& interrupt_flag() {
  static std::atomic<bool> flag{false};
  return flag;
}

}  // namespace fgm
