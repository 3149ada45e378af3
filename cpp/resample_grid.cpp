#include "resample_grid.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "parallel.hpp"
#include "rowops.hpp"
#include "runtime.hpp"

namespace posembed {

namespace {

inline int64_t clamp_index(int64_t i, int64_t size) { return std::min(std::max(i, int64_t{0}), size - 1); }

// Cubic convolution weights of the four taps at offsets -1, 0, 1, 2 from the
// floor of the source coordinate, t its fractional part.
void cubic_weights(double t, double* w) {
  const double A = kCubicA;
  const double x0 = t + 1.0;
  const double x3 = 2.0 - t;
  const double u = 1.0 - t;
  w[0] = ((A * x0 - 5.0 * A) * x0 + 8.0 * A) * x0 - 4.0 * A;
  w[1] = ((A + 2.0) * t - (A + 3.0)) * t * t + 1.0;
  w[2] = ((A + 2.0) * u - (A + 3.0)) * u * u + 1.0;
  w[3] = ((A * x3 - 5.0 * A) * x3 + 8.0 * A) * x3 - 4.0 * A;
}

// acc = w * row (first tap) or acc + w * row (later taps), in the compute type.
template <class S, class C>
inline void accumulate(C* acc, const S* row, C w, int64_t d, bool first) {
  first ? scale(acc, row, w, d) : axpy(acc, row, w, d);
}

template <class S>
void resample_typed(const RowsView& t, int64_t prefix, int64_t h, int64_t w, int64_t h2,
                    int64_t w2, GridMethod method, Align align, char* out) {
  using K = Compute<S>;
  using C = typename K::type;
  const int64_t d = t.cols;
  const int64_t row_bytes = d * static_cast<int64_t>(sizeof(S));
  const int ntaps = method == GridMethod::bicubic ? 4 : 2;

  for (int64_t r = 0; r < prefix; ++r) {
    std::memcpy(out + r * row_bytes, t.data + r * t.row_stride, static_cast<size_t>(row_bytes));
  }
  if (h2 * w2 == 0 || d == 0) return;

  std::vector<AxisTaps> tx(static_cast<size_t>(w2));
  std::vector<AxisTaps> ty(static_cast<size_t>(h2));
  axis_taps(w, w2, method, align, tx.data());
  axis_taps(h, h2, method, align, ty.data());

  auto grid_row = [&](int64_t y, int64_t x) {
    return reinterpret_cast<const S*>(t.data + (prefix + y * w + x) * t.row_stride);
  };

  // Pass 1, along x: tmp[y, x2] = sum_b wx[b] * grid[y, x_b], for every input y.
  // Uninitialised on purpose: every element is written before it is read.
  const std::unique_ptr<C[]> tmp(new C[static_cast<size_t>(h * w2 * d)]);
  const int64_t work1 = h * w2 * d * static_cast<int64_t>(sizeof(C)) * ntaps;
  parallel_for(h * w2, threads_for_bytes(work1), [&](int64_t begin, int64_t end, int) {
    for (int64_t k = begin; k < end; ++k) {
      const int64_t y = k / w2;
      const AxisTaps& tap = tx[static_cast<size_t>(k % w2)];
      C* acc = tmp.get() + k * d;
      for (int b = 0; b < ntaps; ++b) {
        accumulate(acc, grid_row(y, tap.idx[b]), static_cast<C>(tap.w[b]), d, b == 0);
      }
    }
  });

  // Pass 2, along y: out[y2, x2] = sum_a wy[a] * tmp[y_a, x2], accumulated in
  // the output row itself when it holds the compute type.
  char* grid_out = out + prefix * row_bytes;
  const int64_t work2 = h2 * w2 * row_bytes * ntaps;
  parallel_for(h2 * w2, threads_for_bytes(work2), [&](int64_t begin, int64_t end, int) {
    std::vector<C> scratch(std::is_same_v<S, C> ? 0 : static_cast<size_t>(d));
    for (int64_t k = begin; k < end; ++k) {
      const AxisTaps& tap = ty[static_cast<size_t>(k / w2)];
      const int64_t x2 = k % w2;
      S* dst = reinterpret_cast<S*>(grid_out + k * row_bytes);
      C* acc = nullptr;
      if constexpr (std::is_same_v<S, C>) {
        acc = dst;
      } else {
        acc = scratch.data();
      }
      for (int a = 0; a < ntaps; ++a) {
        const C* row = tmp.get() + (tap.idx[a] * w2 + x2) * d;
        accumulate(acc, row, static_cast<C>(tap.w[a]), d, a == 0);
      }
      if constexpr (!std::is_same_v<S, C>) {
        store(dst, acc, d);
      }
    }
  });
}

}  // namespace

void axis_taps(int64_t in_size, int64_t out_size, GridMethod method, Align align,
               AxisTaps* taps) {
  for (int64_t i = 0; i < out_size; ++i) {
    AxisTaps& t = taps[i];
    const SourceCoord c = source_coord(i, in_size, out_size, align);
    if (method == GridMethod::bilinear) {
      // Both taps are always summed, as PyTorch's bilinear does: a source
      // clamped at 0 (half_pixel) still reads its neighbour with weight 0, so
      // an infinity there gives NaN (0 * inf) and -0.0 + 0 * x gives 0.0.
      // (interpolate and lerp, by contrast, copy a row exactly at weight 0.)
      const int64_t lo = std::min(std::max(c.q, int64_t{0}), in_size - 1);
      t.idx[0] = lo;
      t.idx[1] = std::min(lo + 1, in_size - 1);
      const double frac = c.q < 0 ? 0.0 : c.frac;
      t.w[0] = 1.0 - frac;
      t.w[1] = frac;
      t.idx[2] = t.idx[3] = lo;  // unused: bilinear sums two taps
      t.w[2] = t.w[3] = 0.0;
    } else {
      for (int k = 0; k < 4; ++k) t.idx[k] = clamp_index(c.q - 1 + k, in_size);
      cubic_weights(c.frac, t.w);
    }
  }
}

void resample_grid(const RowsView& table, FloatKind kind, int64_t prefix, int64_t h, int64_t w,
                   int64_t h2, int64_t w2, GridMethod method, Align align, char* out) {
  with_float_kind(kind, [&](auto s) {
    using S = decltype(s);
    resample_typed<S>(table, prefix, h, w, h2, w2, method, align, out);
  });
}

}  // namespace posembed
