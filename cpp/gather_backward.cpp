#include "gather_backward.hpp"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "parallel.hpp"
#include "rowops.hpp"
#include "runtime.hpp"

namespace posembed {

namespace {

template <class S>
void gather_backward_t(const S* grad, int64_t cols, const int64_t* positions, int64_t count,
                       int64_t length, bool zero_unused, S* out) {
  using C = typename Compute<S>::type;
  if (length == 0) return;
  // A stable counting sort: the grad rows of each output row, in index order.
  std::vector<int64_t> start(static_cast<size_t>(length + 1), 0);
  // Each position is read once, clamped, into a copy that both passes use:
  // another thread may rewrite the caller's positions meanwhile, and counts
  // and placements taken from different values would overrun the buckets.
  std::vector<int64_t> rows(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    rows[static_cast<size_t>(i)] = std::clamp<int64_t>(read_once(positions + i), 0, length - 1);
  }
  auto row_of = [&](int64_t i) { return rows[static_cast<size_t>(i)]; };
  for (int64_t i = 0; i < count; ++i) ++start[static_cast<size_t>(row_of(i) + 1)];
  for (int64_t r = 0; r < length; ++r) {
    start[static_cast<size_t>(r + 1)] += start[static_cast<size_t>(r)];
  }
  std::vector<int64_t> order(static_cast<size_t>(count));
  {
    std::vector<int64_t> next(start.begin(), start.end() - 1);
    for (int64_t i = 0; i < count; ++i) {
      order[static_cast<size_t>(next[static_cast<size_t>(row_of(i))]++)] = i;
    }
  }
  // Threads take row ranges of equal work (a row costs its grad rows plus one),
  // each row summed by one thread in index order: no atomics, same bits for
  // any thread count.
  const int64_t work = count + length;
  const auto row_bytes = cols * static_cast<int64_t>(sizeof(S));
  const int threads = threads_for_bytes((zero_unused ? work : count) * row_bytes);
  auto first_row = [&](int64_t part, int64_t parts) {
    const int64_t target = work / parts * part + work % parts * part / parts;
    // smallest r with start[r] + r >= target
    int64_t lo = 0, hi = length;
    while (lo < hi) {
      const int64_t m = lo + (hi - lo) / 2;
      if (start[static_cast<size_t>(m)] + m >= target) {
        hi = m;
      } else {
        lo = m + 1;
      }
    }
    return lo;
  };
  // Parts of equal work, several per thread (see parallel_for).
  const int64_t parts = threads > 1 ? std::min<int64_t>(length, threads * kChunksPerThread) : 1;
  parallel_for(parts, threads, [&](int64_t pb, int64_t pe, int) {
    std::vector<C> acc(std::is_same_v<S, C> ? 0 : static_cast<size_t>(cols));
    for (int64_t part = pb; part < pe; ++part) {
      const int64_t r0 = first_row(part, parts);
      const int64_t r1 = part + 1 == parts ? length : first_row(part + 1, parts);
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t k0 = start[static_cast<size_t>(r)];
        const int64_t k1 = start[static_cast<size_t>(r + 1)];
        S* dst = out + r * cols;
        if (k0 == k1) {
          if (zero_unused) std::fill(dst, dst + cols, Compute<S>::store(C(0)));
          continue;
        }
        if constexpr (std::is_same_v<S, float>) {
          // a few grad rows (a position's batch): summed in registers, one
          // store an element; more than fit the pointer list: a group at a
          // time, each added to the sum so far (the same order either way)
          constexpr int64_t kMost = 32;
          const float* from[kMost];
          const int64_t first = std::min(k1 - k0, kMost);
          for (int64_t k = 0; k < first; ++k) {
            from[k] = grad + order[static_cast<size_t>(k0 + k)] * cols;
          }
          sum_rows(dst, from, first, cols);
          for (int64_t k = k0 + first; k < k1; ++k) {
            accumulate(dst, grad + order[static_cast<size_t>(k)] * cols, cols);
          }
        } else if constexpr (std::is_same_v<S, C>) {
          std::fill(dst, dst + cols, S(0));
          for (int64_t k = k0; k < k1; ++k) {
            accumulate(dst, grad + order[static_cast<size_t>(k)] * cols, cols);
          }
        } else {
          std::fill(acc.begin(), acc.end(), C(0));
          for (int64_t k = k0; k < k1; ++k) {
            accumulate(acc.data(), grad + order[static_cast<size_t>(k)] * cols, cols);
          }
          store(dst, acc.data(), cols);
        }
      }
    }
  });
}

}  // namespace

void gather_backward(const char* grad, int64_t cols, const int64_t* positions, int64_t count,
                     int64_t length, FloatKind kind, bool zero_unused, char* out) {
  with_float_kind(kind, [&](auto s) {
    using S = decltype(s);
    gather_backward_t<S>(reinterpret_cast<const S*>(grad), cols, positions, count, length,
                         zero_unused, reinterpret_cast<S*>(out));
  });
}

}  // namespace posembed
