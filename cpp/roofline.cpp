#include "roofline.hpp"

#include <algorithm>
#include <cstring>

#include "copy.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace posembed {

namespace {

// Calls f(begin, end) on each thread's share of [0, n), cut at 4 KiB so that
// no two threads write the same page.
template <class F>
void split(int64_t n, int threads, F&& f) {
  if (threads <= 1) {
    f(int64_t{0}, n);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
#ifdef _OPENMP
    const int tid = omp_get_thread_num();
    const int nthr = omp_get_num_threads();
#else
    const int tid = 0;
    const int nthr = 1;
#endif
    int64_t chunk = (n + nthr - 1) / nthr;
    chunk = (chunk + 4095) & ~int64_t{4095};
    const int64_t b = std::min(n, chunk * tid);
    f(b, std::min(n, b + chunk));
  }
}

}  // namespace

void roofline_fill(char* dst, int64_t n, unsigned char value, int threads, bool stream) {
  split(n, threads, [&](int64_t b, int64_t e) {
    if (stream) {
      fill_stream(dst + b, value, e - b);
      stream_fence();
    } else {
      std::memset(dst + b, value, static_cast<size_t>(e - b));
    }
  });
}

void roofline_copy(char* dst, const char* src, int64_t n, int threads, bool stream) {
  split(n, threads, [&](int64_t b, int64_t e) {
    if (stream) {
      copy_stream(dst + b, src + b, e - b);
      stream_fence();
    } else {
      copy_plain(dst + b, src + b, e - b);
    }
  });
}

}  // namespace posembed
