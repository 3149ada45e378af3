#include "gather.hpp"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "copy.hpp"
#include "parallel.hpp"
#include "runtime.hpp"

namespace posembed {

namespace {

// Positions are checked in blocks: a branch-free scan that vectorises, and a
// second look only inside a block that holds a bad value.
constexpr int64_t kCheckBlock = 4096;
// Software prefetch of the row `kPrefetchDistance` ahead, at most its first
// kPrefetchRowBytes (the hardware streamer takes over within a row). Measured
// on a 64K-row table in DRAM: d=64 rows 74 -> 26 ms, d=1024 rows 16 -> 14 ms.
constexpr int64_t kPrefetchDistance = 8;
constexpr int64_t kPrefetchRowBytes = 4096;

// Signed values map to uint64 so that negatives become huge: one unsigned
// compare against L catches both ends (L <= 2^63 always).
template <class T>
inline uint64_t as_u64(T v) {
  if constexpr (std::is_signed_v<T>) {
    return static_cast<uint64_t>(static_cast<int64_t>(v));
  } else {
    return static_cast<uint64_t>(v);
  }
}

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
  const auto L = static_cast<uint64_t>(rows);
  // A scan reads positions at least 8x faster than a gather writes rows, so
  // it gets threads only for 8x the gather's threshold.
  const int nt = threads_for_bytes(n * static_cast<int64_t>(sizeof(T)) / 8);
  std::vector<int64_t> found(static_cast<size_t>(nt), -1);
  parallel_for(n, nt, [&](int64_t b, int64_t e, int tid) {
    // each thread keeps the first hit of the chunks it ran
    const int64_t hit = first_invalid_in(p, b, e, L);
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
  const auto L = static_cast<uint64_t>(rows);
  int64_t c = 0;
  for (int64_t i = 0; i < n; ++i) c += as_u64(p[i]) >= L ? 1 : 0;
  return c;
}

template <class T, IndexMode M>
inline int64_t resolve(T v, int64_t rows) {
  if constexpr (M == IndexMode::raise) {
    // Checked before any copy; the clamp only keeps memory safe should
    // another thread rewrite the positions while the GIL is released.
    const uint64_t u = as_u64(v);
    return u < static_cast<uint64_t>(rows) ? static_cast<int64_t>(u) : rows - 1;
  } else if constexpr (M == IndexMode::clip) {
    if constexpr (std::is_signed_v<T>) {
      if (v < 0) return 0;
    }
    return as_u64(v) >= static_cast<uint64_t>(rows) ? rows - 1 : static_cast<int64_t>(v);
  } else {
    if constexpr (std::is_signed_v<T>) {
      const int64_t r = static_cast<int64_t>(v) % rows;
      return r < 0 ? r + rows : r;
    } else {
      return static_cast<int64_t>(as_u64(v) % static_cast<uint64_t>(rows));
    }
  }
}

template <class E>
inline void copy_elements(char* dst, const char* src, int64_t cols, int64_t stride) {
  for (int64_t j = 0; j < cols; ++j) {
    std::memcpy(dst + j * static_cast<int64_t>(sizeof(E)), src + j * stride, sizeof(E));
  }
}

// One row whose elements are not adjacent in the table.
inline void copy_strided_row(char* dst, const char* src, const TableView& t) {
  switch (t.itemsize) {
    case 1: copy_elements<uint8_t>(dst, src, t.cols, t.col_stride); break;
    case 2: copy_elements<uint16_t>(dst, src, t.cols, t.col_stride); break;
    case 4: copy_elements<uint32_t>(dst, src, t.cols, t.col_stride); break;
    case 8: copy_elements<uint64_t>(dst, src, t.cols, t.col_stride); break;
    default:
      for (int64_t j = 0; j < t.cols; ++j) {
        std::memcpy(dst + j * t.itemsize, src + j * t.col_stride, static_cast<size_t>(t.itemsize));
      }
  }
}

enum class RowCopy { plain, stream, strided };

template <class T, IndexMode M, RowCopy C>
void gather_rows(const TableView& t, const T* pos, int64_t begin, int64_t end, char* out) {
  const int64_t row_bytes = t.cols * t.itemsize;
  const int64_t pf_bytes = std::min<int64_t>(row_bytes, kPrefetchRowBytes);
  for (int64_t i = begin; i < end; ++i) {
    const char* src = t.data + resolve<T, M>(pos[i], t.rows) * t.row_stride;
    if constexpr (C != RowCopy::strided) {
      // Rows sit at random addresses: the hardware prefetcher restarts on
      // every row, so fetch a later row's lines while this one is copied.
      if (i + kPrefetchDistance < end) {
        const char* ahead = t.data + resolve<T, M>(pos[i + kPrefetchDistance], t.rows) * t.row_stride;
        for (int64_t k = 0; k < pf_bytes; k += 64) __builtin_prefetch(ahead + k, 0, 3);
      }
    }
    char* dst = out + i * row_bytes;
    if constexpr (C == RowCopy::plain) {
      copy_plain(dst, src, row_bytes);
    } else if constexpr (C == RowCopy::stream) {
      copy_stream(dst, src, row_bytes);
    } else {
      copy_strided_row(dst, src, t);
    }
  }
}

template <class T, IndexMode M>
void gather_typed(const TableView& t, const T* pos, int64_t n, char* out, bool fresh) {
  const int64_t row_bytes = t.cols * t.itemsize;
  if (n == 0 || row_bytes == 0) return;
  const int64_t total = n * row_bytes;
  const bool contiguous = t.col_stride == t.itemsize || t.cols == 1;
  const RowCopy how =
      !contiguous ? RowCopy::strided : (use_streaming(total, fresh) ? RowCopy::stream : RowCopy::plain);
  auto run = [&](int64_t b, int64_t e, int) {
    switch (how) {
      case RowCopy::plain: gather_rows<T, M, RowCopy::plain>(t, pos, b, e, out); break;
      case RowCopy::stream:
        gather_rows<T, M, RowCopy::stream>(t, pos, b, e, out);
        stream_fence();
        break;
      case RowCopy::strided: gather_rows<T, M, RowCopy::strided>(t, pos, b, e, out); break;
    }
  };
  parallel_for(n, threads_for_bytes(total), run);
}

template <class T>
int64_t gather_checked(const TableView& t, const T* pos, int64_t n, IndexMode mode, char* out,
                       bool fresh) {
  if (n > 0 && t.rows == 0) return 0;  // nothing to clip or wrap to
  switch (mode) {
    case IndexMode::raise: {
      const int64_t bad = first_invalid(pos, n, t.rows);
      if (bad >= 0) return bad;
      gather_typed<T, IndexMode::raise>(t, pos, n, out, fresh);
      break;
    }
    case IndexMode::clip: gather_typed<T, IndexMode::clip>(t, pos, n, out, fresh); break;
    case IndexMode::wrap: gather_typed<T, IndexMode::wrap>(t, pos, n, out, fresh); break;
  }
  return -1;
}

// Calls f(typed pointer) for the C++ type behind a positions array.
template <class F>
auto with_positions(const PositionsView& p, F&& f) {
  switch (p.kind) {
    case IntKind::i8: return f(static_cast<const int8_t*>(p.data));
    case IntKind::i16: return f(static_cast<const int16_t*>(p.data));
    case IntKind::i32: return f(static_cast<const int32_t*>(p.data));
    case IntKind::i64: return f(static_cast<const int64_t*>(p.data));
    case IntKind::u8: return f(static_cast<const uint8_t*>(p.data));
    case IntKind::u16: return f(static_cast<const uint16_t*>(p.data));
    case IntKind::u32: return f(static_cast<const uint32_t*>(p.data));
    case IntKind::u64: break;
  }
  return f(static_cast<const uint64_t*>(p.data));
}

}  // namespace

int64_t first_invalid_position(const PositionsView& pos, int64_t rows) {
  return with_positions(pos, [&](auto p) { return first_invalid(p, pos.count, rows); });
}

int64_t count_invalid_positions(const PositionsView& pos, int64_t rows) {
  return with_positions(pos, [&](auto p) { return count_invalid(p, pos.count, rows); });
}

std::string position_to_string(const PositionsView& pos, int64_t index) {
  return with_positions(pos, [&](auto p) {
    using T = std::remove_cv_t<std::remove_pointer_t<decltype(p)>>;
    if constexpr (std::is_signed_v<T>) {
      return std::to_string(static_cast<long long>(p[index]));
    } else {
      return std::to_string(static_cast<unsigned long long>(p[index]));
    }
  });
}

int64_t gather(const TableView& table, const PositionsView& pos, IndexMode mode, char* out,
               bool fresh_out) {
  return with_positions(
      pos, [&](auto p) { return gather_checked(table, p, pos.count, mode, out, fresh_out); });
}

}  // namespace posembed
