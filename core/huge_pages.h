// Large working arrays backed by transparent huge pages.
//
// Why: a scoring pass or an APG solve allocates arrays of 10^8 bytes afresh
// (poly-2 bounds over 1.5·10^7 features, the transposed active rows, the APG
// inner-product cache). glibc hands such sizes to mmap and gives them back on
// free, so every pass faults every 4 KiB page in again; on the virtual
// machines fgm is benchmarked on a fault costs several microseconds (256 MiB
// took 3.5 s to first touch, 0.1 s in 2 MiB pages). HugePageAllocator maps
// arrays of at least kHugePageMin bytes 2 MiB-aligned and asks for huge pages
// (madvise(MADV_HUGEPAGE); the kernel may decline: then it is an ordinary
// mapping). Smaller arrays use operator new. The bytes are the same as with
// std::allocator (rounded up to 2 MiB), so budget reservations are unchanged.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace fgm {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;
inline constexpr size_t kHugePageMin = size_t{4} << 20;  // smaller arrays: operator new

// Raw storage for `bytes` (never null; throws std::bad_alloc) and its release.
void* huge_page_allocate(size_t bytes);
void huge_page_free(void* p, size_t bytes) noexcept;

template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() noexcept = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}
  T* allocate(size_t n) {
    static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__, "over-aligned types are not supported");
    if (n > size_t(-1) / sizeof(T)) throw std::bad_alloc();
    return static_cast<T*>(huge_page_allocate(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) noexcept { huge_page_free(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const noexcept { return true; }
  template <class U>
  bool operator!=(const HugePageAllocator<U>&) const noexcept { return false; }
};

template <class T>
using HugeVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace fgm
