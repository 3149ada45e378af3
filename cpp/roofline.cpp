#include "roofline.hpp"

#include <algorithm>
#include <cstring>

#include "copy.hpp"
#include "parallel.hpp"

namespace posembed {

namespace {

// Each thread's share of [0, n), cut at 4 KiB so that no two threads write
// the same page.
template <class F>
void split(int64_t n, int threads, F&& f) {
  parallel_for(n, threads, [&](int64_t b, int64_t e, int) { f(b, e); }, 4096);
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
