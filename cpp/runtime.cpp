#include "runtime.hpp"

#include <algorithm>
#include <atomic>

#if defined(__unix__) || defined(__APPLE__)
#include <pthread.h>
#endif

#ifdef _OPENMP
#include <omp.h>
#endif

namespace posembed {

namespace {

int openmp_threads() {
#ifdef _OPENMP
  const int n = omp_get_max_threads();
  return n > 0 ? n : 1;
#else
  return 1;
#endif
}

const int g_default_threads = openmp_threads();
std::atomic<int> g_threads{0};  // 0: follow OpenMP
thread_local int t_threads = 0;  // 0: no count of the calling thread's own
std::atomic<bool> g_pool_started{false};
std::atomic<bool> g_forked{false};
std::atomic<int> g_last_team{1};
std::atomic<int> g_helpers_busy{0};
std::atomic<int> g_helpers_peak{0};
std::atomic<int> g_calls{0};
std::atomic<int> g_calls_peak{0};
std::atomic<int64_t> g_parallel_min{kParallelMinBytes};
std::atomic<int64_t> g_stream_min{kStreamMinBytes};

void on_fork_child() {
  if (g_pool_started.load()) g_forked.store(true);
}

bool register_fork_handler() {
#if defined(__unix__) || defined(__APPLE__)
  return pthread_atfork(nullptr, nullptr, on_fork_child) == 0;
#else
  return false;
#endif
}
const bool g_fork_handler = register_fork_handler();

void raise_peak(std::atomic<int>& peak, int value) {
  int seen = peak.load(std::memory_order_relaxed);
  while (value > seen && !peak.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

}  // namespace

int default_num_threads() { return g_default_threads; }

int max_num_threads() {
#ifdef _OPENMP
  const int procs = omp_get_num_procs();
#else
  const int procs = 1;
#endif
  return 4 * (procs > 0 ? procs : 1);
}

int get_num_threads() {
  int n = t_threads > 0 ? t_threads : g_threads.load(std::memory_order_relaxed);
  if (n <= 0) n = std::min(openmp_threads(), max_num_threads());
  return usable_threads(n);
}

void set_num_threads(int n) {
  g_threads.store(n <= 0 ? 0 : std::min(n, max_num_threads()), std::memory_order_relaxed);
}

int set_calling_thread_threads(int n) {
  const int before = t_threads;
  t_threads = n <= 0 ? 0 : std::min(n, max_num_threads());
  return before;
}

int calling_thread_threads() { return t_threads; }

bool num_threads_set() { return g_threads.load(std::memory_order_relaxed) > 0; }

int usable_threads(int requested) {
  (void)g_fork_handler;
  return g_forked.load(std::memory_order_relaxed) ? 1 : requested;
}

bool forked_child() { return g_forked.load(); }

int acquire_helpers(int wanted) {
  if (wanted <= 0) return 0;
#ifdef _OPENMP
  if (omp_in_parallel()) return 0;  // inside a caller's team: no nested teams
#endif
  int busy = g_helpers_busy.load(std::memory_order_relaxed);
  for (;;) {
    const int take = std::min(wanted, wanted - busy);
    if (take <= 0) return 0;
    if (g_helpers_busy.compare_exchange_weak(busy, busy + take, std::memory_order_acq_rel,
                                             std::memory_order_relaxed)) {
      raise_peak(g_helpers_peak, busy + take);
      return take;
    }
  }
}

void release_helpers(int n) {
  if (n > 0) g_helpers_busy.fetch_sub(n, std::memory_order_acq_rel);
}

void note_call_started() {
  raise_peak(g_calls_peak, g_calls.fetch_add(1, std::memory_order_relaxed) + 1);
}
void note_call_finished() { g_calls.fetch_sub(1, std::memory_order_relaxed); }

int calls_in_flight_peak(bool reset) {
  return reset ? g_calls_peak.exchange(g_calls.load()) : g_calls_peak.load();
}
int helpers_busy_peak(bool reset) {
  return reset ? g_helpers_peak.exchange(g_helpers_busy.load()) : g_helpers_peak.load();
}

void note_pool_started() { g_pool_started.store(true, std::memory_order_relaxed); }
void note_team_size(int n) { g_last_team.store(n, std::memory_order_relaxed); }
int last_team_size() { return g_last_team.load(std::memory_order_relaxed); }

int64_t parallel_min_bytes() { return g_parallel_min.load(std::memory_order_relaxed); }
int64_t stream_min_bytes() { return g_stream_min.load(std::memory_order_relaxed); }
bool use_streaming(int64_t output_bytes, bool output_just_allocated) {
  return !output_just_allocated && output_bytes >= stream_min_bytes();
}

bool use_streaming_random_reads(int64_t output_bytes) {
  return output_bytes >= stream_min_bytes();
}

void set_thresholds(int64_t parallel_min, int64_t stream_min) {
  g_parallel_min.store(parallel_min < 0 ? kParallelMinBytes : std::max<int64_t>(parallel_min, 1));
  g_stream_min.store(stream_min < 0 ? kStreamMinBytes : stream_min);
}

int threads_for_bytes(int64_t bytes) {
  const int64_t threshold = parallel_min_bytes();
  if (bytes < threshold) return 1;
  const int n = get_num_threads();
  // Each thread should get at least one threshold's worth of work.
  const int64_t useful = bytes / threshold;
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

}  // namespace posembed
