#include "runtime.hpp"

#include <atomic>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace posembed {

namespace {

int initial_threads() {
#ifdef _OPENMP
  const int n = omp_get_max_threads();
  return n > 0 ? n : 1;
#else
  return 1;
#endif
}

const int g_default_threads = initial_threads();
std::atomic<int> g_threads{g_default_threads};

}  // namespace

int default_num_threads() { return g_default_threads; }

int get_num_threads() { return g_threads.load(std::memory_order_relaxed); }

void set_num_threads(int n) {
  g_threads.store(n <= 0 ? g_default_threads : n, std::memory_order_relaxed);
}

int threads_for_bytes(int64_t bytes) {
  if (bytes < kParallelMinBytes) return 1;
  const int n = get_num_threads();
  // Each thread should get at least one threshold's worth of work.
  const int64_t useful = bytes / kParallelMinBytes;
  return useful < n ? static_cast<int>(useful) : n;
}

bool openmp_enabled() {
#ifdef _OPENMP
  return true;
#else
  return false;
#endif
}

int openmp_version() {
#ifdef _OPENMP
  return _OPENMP;
#else
  return 0;
#endif
}

std::string cpu_simd_level() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl")) {
    return "avx512";
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "avx2";
  return "baseline";
#else
  return "baseline";
#endif
}

std::string kernel_simd_level() {
  // Every kernel so far moves bytes; the x86-64 baseline (SSE2, with
  // streaming stores) already saturates memory for them. Per-ISA builds for
  // the arithmetic kernels come with run-time dispatch.
#if defined(__x86_64__)
  return "baseline (sse2)";
#else
  return "baseline";
#endif
}

}  // namespace posembed
