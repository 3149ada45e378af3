// Run-time facts and controls shared by every kernel: the thread count, the
// work threshold below which a call stays on one thread, and the SIMD levels
// that the CPU offers.
#pragma once

#include <cstdint>
#include <string>

namespace posembed {

// Threads a kernel may use: set_num_threads(n), else OMP_NUM_THREADS / the
// OpenMP default, read once when the module loads.
int get_num_threads();
void set_num_threads(int n);   // n >= 1; 0 restores the default
int default_num_threads();

// Threads for a call that moves `bytes` of output: one below the parallel
// threshold, so that small calls never pay for waking a thread team.
int threads_for_bytes(int64_t bytes);
// The most threads set_num_threads accepts: 4 per CPU, so that a typo cannot
// start thousands of threads.
int max_num_threads();

// GNU OpenMP's thread pool does not survive fork: a child process that uses
// it hangs. After a fork in a process whose pool was started, kernels in the
// child run on its one thread (use spawn or forkserver for parallel workers).
int usable_threads(int requested);
bool forked_child();
void note_pool_started();
// Team size of the most recent parallel_for (for tests and diagnostics).
void note_team_size(int n);
int last_team_size();
constexpr int64_t kParallelMinBytes = 256 * 1024;

// Outputs at least this large are written with streaming (non-temporal)
// stores: they cannot stay in the last-level cache anyway, and ordinary
// stores would first read every destination line (read-for-ownership).
constexpr int64_t kStreamMinBytes = int64_t{8} << 20;

bool openmp_enabled();
int openmp_version();          // the _OPENMP date macro, 0 without OpenMP

// Best SIMD level this CPU supports: "avx512", "avx2" or "baseline".
std::string cpu_simd_level();
// SIMD level the compiled kernels use on this CPU.
std::string kernel_simd_level();

}  // namespace posembed
