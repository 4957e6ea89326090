// Run-time choice of the kernel table (see simd.h). Compiled for generic x86-64.
#include <atomic>
#include <cstdlib>
#include <mutex>

#include "core/error.h"
#include "core/messages.h"
#include "core/simd/simd.h"

namespace fgm::simd {
namespace {

constexpr int kUnset = -1;
std::atomic<int> g_active{kUnset};
std::atomic<const Kernels*> g_table{nullptr};  // the active target's table (kernels() fast path)
std::once_flag g_env_once;

std::string supported_list() {
  std::string out;
  for (Target t : supported_targets()) out += std::string(out.empty() ? "" : ", ") + target_name(t);
  return out;
}

Target best_supported() {
  if (cpu_supports(Target::kAvx512)) return Target::kAvx512;
  if (cpu_supports(Target::kAvx2)) return Target::kAvx2;
  return Target::kScalar;
}

}  // namespace

const char* target_name(Target target) {
  switch (target) {
    case Target::kScalar: return "scalar";
    case Target::kAvx2: return "avx2";
    case Target::kAvx512: return "avx512";
  }
  return "unknown";
}

Target parse_target(const std::string& name) {
  if (name == "scalar") return Target::kScalar;
  if (name == "avx2") return Target::kAvx2;
  if (name == "avx512") return Target::kAvx512;
  throw Error(ErrorKind::kConfig, msg::bad_enum("environment: ", "FGM_SIMD", name, "scalar, avx2, avx512"));
}

bool cpu_supports(Target target) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  switch (target) {
    case Target::kScalar: return true;
    case Target::kAvx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case Target::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }
  return false;
#else
  return target == Target::kScalar;
#endif
}

std::vector<Target> supported_targets() {
  std::vector<Target> out;
  for (Target t : {Target::kScalar, Target::kAvx2, Target::kAvx512})
    if (cpu_supports(t)) out.push_back(t);
  return out;
}

void set_active_target(Target target) {
  if (!cpu_supports(target))
    throw Error(ErrorKind::kConfig, msg::simd_target_unsupported(target_name(target), supported_list()));
  g_active.store(static_cast<int>(target));
  g_table.store(&kernels_for(target));
}

Target active_target() {
  std::call_once(g_env_once, [] {
    if (g_active.load() != kUnset) return;  // forced before first use
    const char* env = std::getenv("FGM_SIMD");
    if (env && *env) {
      set_active_target(parse_target(env));
      return;
    }
    g_active.store(static_cast<int>(best_supported()));
    g_table.store(&kernels_for(best_supported()));
  });
  return static_cast<Target>(g_active.load());
}

const Kernels& kernels_for(Target target) {
  if (!cpu_supports(target))
    throw Error(ErrorKind::kConfig, msg::simd_target_unsupported(target_name(target), supported_list()));
  switch (target) {
    case Target::kAvx2: return avx2_kernels();
    case Target::kAvx512: return avx512_kernels();
    case Target::kScalar: break;
  }
  return scalar_kernels();
}

const Kernels& kernels() {
  if (const Kernels* k = g_table.load(std::memory_order_acquire)) return *k;
  return kernels_for(active_target());
}

}  // namespace fgm::simd
