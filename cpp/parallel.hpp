// The one way into OpenMP for every kernel: split [0, n) into one contiguous
// range per thread. Ranges depend only on n and the team size, and every
// kernel computes each output element from its inputs alone, so results never
// depend on the thread count.
#pragma once

#include <algorithm>
#include <cstdint>

#include "runtime.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace posembed {

// Calls f(begin, end, tid) once per thread of a team of at most `threads`
// (fewer after fork, see usable_threads); range boundaries are multiples of
// `granule`. With one thread, f(0, n, 0) runs on the calling thread and no
// OpenMP region is entered.
template <class F>
void parallel_for(int64_t n, int threads, F&& f, int64_t granule = 1) {
  threads = usable_threads(threads);
  if (threads <= 1 || n <= granule) {
    note_team_size(1);
    f(int64_t{0}, n, 0);
    return;
  }
  note_pool_started();
#pragma omp parallel num_threads(threads)
  {
#ifdef _OPENMP
    const int tid = omp_get_thread_num();
    const int nthr = omp_get_num_threads();
#else
    const int tid = 0;
    const int nthr = 1;
#endif
    if (tid == 0) note_team_size(nthr);
    int64_t chunk = (n + nthr - 1) / nthr;
    chunk = (chunk + granule - 1) / granule * granule;
    const int64_t b = std::min(n, chunk * tid);
    f(b, std::min(n, b + chunk), tid);
  }
}

}  // namespace posembed
