#include "roofline.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "copy.hpp"
#include "fileio.hpp"
#include "parallel.hpp"
#include "random.hpp"
#include "rowops.hpp"

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

uint64_t roofline_spin(int64_t n, int threads) {
  std::atomic<uint64_t> sum{0};
  parallel_for(n, threads, [&](int64_t b, int64_t e, int) {
    uint64_t x = static_cast<uint64_t>(b) | 1u;
    for (int64_t i = b; i < e; ++i) {  // xorshift64: each step needs the last
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
    }
    sum.fetch_add(x, std::memory_order_relaxed);
  });
  return sum.load();
}

double roofline_flops(int64_t n, int threads, bool fused) {
  // the operands come through a volatile, so the loop cannot be folded away
  volatile float one = 1.0f;
  volatile float zero = 0.0f;
  const float a = one;
  const float b = zero;
  std::atomic<int64_t> total{0};
  parallel_for(n, threads, [&](int64_t begin, int64_t end, int) {
    const float got = flops_loop(end - begin, a, b, fused);
    total.fetch_add(static_cast<int64_t>(got), std::memory_order_relaxed);
  });
  return static_cast<double>(total.load());
}

uint64_t roofline_random_bits(int64_t n, int threads) {
  constexpr int64_t kWords = 1024;  // 4 KiB: the buffer never leaves L1
  const RandomKey key = random_key(1);
  std::atomic<uint64_t> folded{0};
  // chunks start at multiples of kWords, so the words folded in (the first
  // of every kWords) are the same whatever the thread count
  parallel_for(n, threads, [&](int64_t begin, int64_t end, int) {
    uint32_t u[kWords];
    uint64_t x = 0;
    for (int64_t b = begin; b < end; b += kWords) {
      random_bits(key, b, std::min(kWords, end - b), u);
      x ^= u[0];
    }
    folded.fetch_xor(x, std::memory_order_relaxed);
  }, kWords);
  return folded.load();
}

int roofline_pread(int fd, const int64_t* ranges, int64_t n, char* dst, int threads) {
  std::vector<int64_t> at(static_cast<size_t>(n) + 1, 0);
  for (int64_t i = 0; i < n; ++i) at[static_cast<size_t>(i) + 1] = at[static_cast<size_t>(i)] + ranges[2 * i + 1];
  std::atomic<int> failed{0};
  parallel_for(n, threads, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      int64_t ended = 0;
      const int err = pread_all(fd, reinterpret_cast<uint8_t*>(dst) + at[static_cast<size_t>(i)],
                                ranges[2 * i + 1], ranges[2 * i], &ended);
      if (err != 0) failed.store(err);
    }
  });
  return failed.load();
}

int roofline_mapped(const uint8_t* map, int64_t map_size, const int64_t* ranges, int64_t n,
                    char* dst, int threads) {
  std::vector<int64_t> at(static_cast<size_t>(n) + 1, 0);
  for (int64_t i = 0; i < n; ++i) {
    if (ranges[2 * i] < 0 || ranges[2 * i + 1] < 0 || ranges[2 * i] > map_size - ranges[2 * i + 1]) {
      return -1;
    }
    at[static_cast<size_t>(i) + 1] = at[static_cast<size_t>(i)] + ranges[2 * i + 1];
  }
  parallel_for(n, threads, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      std::memcpy(dst + at[static_cast<size_t>(i)], map + ranges[2 * i],
                  static_cast<size_t>(ranges[2 * i + 1]));
    }
  });
  return 0;
}

}  // namespace posembed
