#include "positions.hpp"

#include <algorithm>
#include <vector>

#include "parallel.hpp"
#include "runtime.hpp"

namespace posembed {

namespace {

// Positions are checked in blocks: a branch-free scan that vectorises, and a
// second look only inside a block that holds a bad value.
constexpr int64_t kCheckBlock = 4096;

template <class T>
int64_t first_invalid_in(const T* p, int64_t begin, int64_t end, uint64_t rows) {
  for (int64_t b = begin; b < end; b += kCheckBlock) {
    const int64_t e = std::min(end, b + kCheckBlock);
    bool bad = false;
    for (int64_t i = b; i < e; ++i) bad |= as_u64(p[i]) >= rows;
    if (bad) {
      for (int64_t i = b; i < e; ++i) {
        if (as_u64(p[i]) >= rows) return i;
      }
    }
  }
  return -1;
}

template <class T>
int64_t first_invalid(const T* p, int64_t n, int64_t rows) {
  const auto top = static_cast<uint64_t>(rows);
  // A scan reads positions at least 8x faster than a gather writes rows, so
  // it gets threads only for 8x the gather's threshold.
  const int threads = threads_for_bytes(n * static_cast<int64_t>(sizeof(T)) / 8);
  if (threads <= 1) return first_invalid_in(p, 0, n, top);  // small calls stay cheap
  std::vector<int64_t> found(static_cast<size_t>(threads), -1);
  parallel_for(n, threads, [&](int64_t b, int64_t e, int tid) {
    // each thread keeps the first hit of the chunks it ran
    const int64_t hit = first_invalid_in(p, b, e, top);
    int64_t& mine = found[static_cast<size_t>(tid)];
    if (hit >= 0 && (mine < 0 || hit < mine)) mine = hit;
  });
  // the first hit in the array, whatever the thread count or chunk order
  int64_t first = -1;
  for (const int64_t f : found) {
    if (f >= 0 && (first < 0 || f < first)) first = f;
  }
  return first;
}

template <class T>
int64_t count_invalid(const T* p, int64_t n, int64_t rows) {
  const auto top = static_cast<uint64_t>(rows);
  int64_t c = 0;
  for (int64_t i = 0; i < n; ++i) c += as_u64(p[i]) >= top ? 1 : 0;
  return c;
}

}  // namespace

OutOfRange find_out_of_range(const PositionsView& pos, int64_t rows) {
  return with_positions(pos, [&](auto p) {
    const int64_t first = first_invalid(p, pos.count, rows);
    return OutOfRange{first, first < 0 ? 0 : count_invalid(p, pos.count, rows)};
  });
}

void widen_positions(const PositionsView& pos, int64_t* out) {
  with_positions(pos, [&](auto p) {
    for (int64_t i = 0; i < pos.count; ++i) out[i] = static_cast<int64_t>(p[i]);
  });
}

}  // namespace posembed
