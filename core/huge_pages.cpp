#include "core/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>

namespace fgm {
namespace {

size_t mapped_bytes(size_t bytes) { return (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes; }

}  // namespace

void* huge_page_allocate(size_t bytes) {
  if (bytes < kHugePageMin) return ::operator new(bytes == 0 ? 1 : bytes);
  if (bytes > SIZE_MAX - 2 * kHugePageBytes) throw std::bad_alloc();  // the rounding below would wrap
  const size_t size = mapped_bytes(bytes);
  // Map one huge page more and cut the unaligned head and tail off.
  const size_t span = size + kHugePageBytes;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  if (aligned > start) munmap(raw, aligned - start);
  const uintptr_t end = start + span, used_end = aligned + size;
  if (end > used_end) munmap(reinterpret_cast<void*>(used_end), end - used_end);
  void* p = reinterpret_cast<void*>(aligned);
#ifdef MADV_HUGEPAGE
  madvise(p, size, MADV_HUGEPAGE);  // a hint: ignored where THP is off
#endif
  return p;
}

void huge_page_free(void* p, size_t bytes) noexcept {
  if (!p) return;
  if (bytes < kHugePageMin) {
    ::operator delete(p);
    return;
  }
  munmap(p, mapped_bytes(bytes));
}

}  // namespace fgm
