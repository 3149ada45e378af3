#include "interpolate.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "copy.hpp"
#include "parallel.hpp"
#include "rowops.hpp"
#include "runtime.hpp"

namespace posembed {

namespace {

// Floor division for a positive denominator.
inline int64_t floor_div(int64_t num, int64_t den) {
  const int64_t q = num / den;
  return (num % den != 0 && num < 0) ? q - 1 : q;
}

// Weights in the compute type (float32 for float16 and bfloat16 storage).
template <class S>
void blend_row(S* dst, const S* a, const S* b, double w, int64_t d) {
  using C = typename Compute<S>::type;
  blend(dst, a, b, static_cast<C>(1.0 - w), static_cast<C>(w), d);
}

// Writes out rows [0, n): row i from tap(i). Large outputs that the caller
// passed in are assembled in a per-thread row buffer and written with
// streaming stores (see use_streaming).
template <class S, class TapFn>
void blend_rows(const RowsView& t, int64_t n, TapFn tap, char* out, bool out_just_allocated) {
  const int64_t d = t.cols;
  const int64_t row_bytes = d * static_cast<int64_t>(sizeof(S));
  if (n == 0 || row_bytes == 0) return;
  const bool stream = use_streaming(n * row_bytes, out_just_allocated);
  auto row = [&](int64_t r) { return reinterpret_cast<const S*>(t.data + r * t.row_stride); };
  parallel_for(n, threads_for_bytes(n * row_bytes), [&](int64_t begin, int64_t end, int) {
    std::vector<S> buf(stream && !std::is_same_v<S, float> ? static_cast<size_t>(d) : 0);
    for (int64_t i = begin; i < end; ++i) {
      const LinearTap k = tap(i);
      char* dst = out + i * row_bytes;
      if (k.w == 0.0 || k.lo == k.hi) {
        const auto* src = reinterpret_cast<const char*>(row(k.lo));
        stream ? copy_stream(dst, src, row_bytes) : copy_plain(dst, src, row_bytes);
      } else if (stream) {
        if constexpr (std::is_same_v<S, float>) {
          blend_stream(reinterpret_cast<float*>(dst), row(k.lo), row(k.hi),
                       static_cast<float>(1.0 - k.w), static_cast<float>(k.w), d);
        } else {
          blend_row(buf.data(), row(k.lo), row(k.hi), k.w, d);
          copy_stream(dst, reinterpret_cast<const char*>(buf.data()), row_bytes);
        }
      } else {
        blend_row(reinterpret_cast<S*>(dst), row(k.lo), row(k.hi), k.w, d);
      }
    }
    if (stream) stream_fence();
  });
}


}  // namespace

LinearTap linear_tap(SourceCoord c, int64_t in_size) {
  if (c.q < 0) return {0, 0, 0.0};  // half_pixel: the source clamps at 0
  const int64_t lo = std::min(c.q, in_size - 1);
  const int64_t hi = std::min(lo + 1, in_size - 1);
  return {lo, hi, lo == c.q ? c.frac : 0.0};
}

SourceCoord source_coord(int64_t i, int64_t in_size, int64_t out_size, Align align) {
  // Products stay far below 2^63: i < out_size and both sizes are row counts
  // of arrays that fit in memory.
  int64_t num = 0;
  int64_t den = 1;
  switch (align) {
    case Align::scale:
      num = i * in_size;
      den = out_size;
      break;
    case Align::half_pixel:
      num = (2 * i + 1) * in_size - out_size;
      den = 2 * out_size;
      break;
    case Align::corners:
      if (out_size == 1) return {0, 0.0};
      num = i * (in_size - 1);
      den = out_size - 1;
      break;
  }
  const int64_t q = floor_div(num, den);
  return {q, static_cast<double>(num - q * den) / static_cast<double>(den)};
}

void interpolate(const RowsView& table, FloatKind kind, int64_t length, Align align,
                 int64_t first, char* out, bool out_just_allocated) {
  // Each thread works out its rows' taps as it goes (a few integer
  // operations a row): a plan of every row made first, on one thread, took
  // a fifth of the call on 16 threads.
  const int64_t rows = table.rows;
  auto tap = [&](int64_t i) {
    return linear_tap(source_coord(first + i, rows, length, align), rows);
  };
  with_float_kind(kind, [&](auto s) {
    using S = decltype(s);
    blend_rows<S>(table, length - first, tap, out, out_just_allocated);
  });
}

int64_t first_invalid_fraction(const double* pos, int64_t n, int64_t rows) {
  const auto top = static_cast<double>(rows - 1);
  for (int64_t i = 0; i < n; ++i) {
    // written so that NaN fails
    if (!(pos[i] >= 0.0 && pos[i] <= top)) return i;
  }
  return -1;
}

void lerp(const RowsView& table, FloatKind kind, const double* pos, int64_t n, char* out,
          bool out_just_allocated) {
  const int64_t last = table.rows - 1;
  auto tap = [&](int64_t i) {
    // Checked before; the clamp (which also maps NaN to 0) only keeps memory
    // safe should another thread rewrite the positions meanwhile. The value is
    // read once (volatile): two reads could see a check pass and then a NaN
    // (found by UBSan in the racing-writer test).
    const double v = *static_cast<const volatile double*>(pos + i);
    const double p = v >= 0.0 ? (v < static_cast<double>(last) ? v : static_cast<double>(last)) : 0.0;
    const double fl = std::floor(p);
    const auto lo = static_cast<int64_t>(fl);
    return LinearTap{lo, std::min(lo + 1, last), p - fl};
  };
  with_float_kind(kind, [&](auto s) {
    using S = decltype(s);
    blend_rows<S>(table, n, tap, out, out_just_allocated);
  });
}

}  // namespace posembed
