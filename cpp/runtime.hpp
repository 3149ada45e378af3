// Run-time facts and controls shared by every kernel: the thread count and
// the work thresholds (the SIMD level is in simd.hpp).
#pragma once

#include <cstdint>
#include <string>

namespace posembed {

// Threads a kernel may use. posembed's own setting, set_num_threads(n), wins
// when made; until then (and after set_num_threads(0)) a call follows
// OpenMP's nthreads-var of the calling thread, read at each call: the
// OMP_NUM_THREADS default, or what omp_set_num_threads (threadpoolctl's
// threadpool_limits) set.
int get_num_threads();
void set_num_threads(int n);   // n >= 1; 0 restores following OpenMP
bool num_threads_set();        // whether set_num_threads(n >= 1) is in force
// A count for the calling thread alone, above every other setting while it
// lasts (a pipeline's own threads: its reading and writing threads beside
// one that cuts); 0 clears it. Returns the one it replaces.
int set_calling_thread_threads(int n);
int calling_thread_threads();  // that count, 0 when none
int default_num_threads();     // OpenMP's nthreads-var when the module loaded

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

// Concurrent calls share one budget of helper threads. A call that may use n
// threads (its own plus n - 1 helpers) takes helpers only while fewer than
// n - 1 are busy across all calls in flight, so calls from many Python threads
// at once run with fewer (or no) helpers instead of multiplying teams; a call
// alone gets its whole team. Results never depend on the team size. Inside an
// active OpenMP parallel region (a caller's own team), a call takes no helpers.
int acquire_helpers(int wanted);  // returns how many it took, 0..wanted
void release_helpers(int n);
// Diagnostics for tests: calls in flight and busy helpers, and their peaks
// since the last reset.
void note_call_started();
void note_call_finished();
int calls_in_flight_peak(bool reset);
int helpers_busy_peak(bool reset);
constexpr int64_t kParallelMinBytes = 256 * 1024;
int64_t parallel_min_bytes();

// Outputs at least this large, written into memory the caller passed (out=),
// use streaming (non-temporal) stores: they cannot stay in the last-level
// cache anyway, and ordinary stores would first read every destination line
// (read-for-ownership). An output the kernel allocated itself is different:
// each page is zeroed by the page-fault handler just before the kernel
// writes it, so streaming gains nothing there (measured on interpolate
// 2048 -> 8192 rows, d = 1024, fresh output: 6.4-6.9 ms either way, against
// 2.5-3.3 ms streamed into a reused out=).
constexpr int64_t kStreamMinBytes = int64_t{8} << 20;
int64_t stream_min_bytes();
bool use_streaming(int64_t output_bytes, bool output_just_allocated);
// A kernel that reads rows at random (embed's token rows) streams even a
// fresh output of stream_min_bytes() or more: there its random reads compete
// with the reads ordinary stores make of every destination line (measured on
// embed, B 8, T 1024, d 768: 0.63-0.71x of the fresh copy roofline plain,
// 0.86-1.03x streamed).
bool use_streaming_random_reads(int64_t output_bytes);

// Overrides both thresholds (a value < 0 restores the default): for tuning,
// and for tests that drive the parallel and streaming paths with small data.
void set_thresholds(int64_t parallel_min, int64_t stream_min);

bool openmp_enabled();
int openmp_version();          // the _OPENMP date macro, 0 without OpenMP

}  // namespace posembed
