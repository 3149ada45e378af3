// The one way into OpenMP for every kernel: split [0, n) into contiguous
// chunks that the team's threads take in turn. Chunk boundaries depend only
// on n, the team size and the granule, and every kernel computes each output
// element from its inputs alone, so results never depend on the thread count
// or on which thread ran which chunk.
//
// Why chunks and not one range per thread: with one fixed range each, a call
// lasts as long as its slowest thread, and a thread shares its core with
// whatever else runs there (another process, a hypervisor's neighbour, an
// efficiency core). Each thread starts on its own contiguous share of the
// chunks, the same share on every call, so an output that stays in cache
// stays in the cache of the core that writes it; a thread that finishes its
// share early then takes chunks from the others' shares, front first.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "runtime.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace posembed {

constexpr int64_t kChunksPerThread = 8;

namespace detail {
struct alignas(64) ChunkCounter {  // one cache line each: no false sharing
  std::atomic<int64_t> next{0};
  int64_t end = 0;
};
}  // namespace detail

// Calls f(begin, end, tid) for chunks covering [0, n) on a team of at most
// `threads` (fewer after fork, see usable_threads, and while concurrent calls
// hold the helper threads, see acquire_helpers); chunk boundaries are
// multiples of `granule`, and a thread may get several chunks, in any order.
// With one thread, f(0, n, 0) runs on the calling thread and no OpenMP region
// is entered.
namespace detail {
// Counts the call in flight and holds its helper threads until it returns
// (also when f throws).
struct CallScope {
  int helpers = 0;
  CallScope() { note_call_started(); }
  ~CallScope() {
    release_helpers(helpers);
    note_call_finished();
  }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;
};
}  // namespace detail

template <class F>
void parallel_for(int64_t n, int threads, F&& f, int64_t granule = 1) {
  detail::CallScope scope;
  threads = usable_threads(threads);
  if (threads > 1 && n > granule) {
    scope.helpers = acquire_helpers(threads - 1);  // shared with concurrent calls
    threads = 1 + scope.helpers;
  }
  if (threads <= 1 || n <= granule) {
    note_team_size(1);
    f(int64_t{0}, n, 0);
    return;
  }
  note_pool_started();
  int64_t chunk = (n + threads * kChunksPerThread - 1) / (threads * kChunksPerThread);
  chunk = (chunk + granule - 1) / granule * granule;
  const int64_t chunks = (n + chunk - 1) / chunk;
  // Thread t's share: chunks [chunks * t / threads, chunks * (t + 1) / threads).
  const auto team = static_cast<size_t>(threads);
  const std::unique_ptr<detail::ChunkCounter[]> share(new detail::ChunkCounter[team]);
  for (size_t t = 0; t < team; ++t) {
    const auto i = static_cast<int64_t>(t);
    share[t].next.store(chunks * i / threads, std::memory_order_relaxed);
    share[t].end = chunks * (i + 1) / threads;
  }
#pragma omp parallel num_threads(threads)
  {
#ifdef _OPENMP
    const int tid = omp_get_thread_num();
    if (tid == 0) note_team_size(omp_get_num_threads());
#else
    const int tid = 0;
#endif
    // own share first, then the others' (a smaller team than asked for
    // leaves shares without an owner: they are taken the same way)
    for (size_t k = 0; k < team; ++k) {
      detail::ChunkCounter& from = share[(static_cast<size_t>(tid) + k) % team];
      for (int64_t c = from.next.fetch_add(1, std::memory_order_relaxed); c < from.end;
           c = from.next.fetch_add(1, std::memory_order_relaxed)) {
        const int64_t b = c * chunk;
        f(b, std::min(n, b + chunk), tid);
      }
    }
  }
}

// One read of a value in a caller's array, which another thread may rewrite
// while the GIL is released. std::clamp and friends take references: handed
// the array element itself, they compare one read and return another.
inline int64_t read_once(const int64_t* p) { return *static_cast<const volatile int64_t*>(p); }

}  // namespace posembed
