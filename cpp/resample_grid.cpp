#include "resample_grid.hpp"

#include <algorithm>
#include <cmath>
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

// PyTorch's antialiasing filters (Pillow's): the triangle, and the cubic
// convolution kernel with A = -0.5; x in units of the (widened) support.
double antialias_filter(double x, GridMethod method) {
  x = std::abs(x);
  if (method == GridMethod::bilinear) return x < 1.0 ? 1.0 - x : 0.0;
  const double A = kCubicAntialiasA;
  if (x < 1.0) return ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0;
  if (x < 2.0) return ((A * x - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A;
  return 0.0;
}

// acc = w * row (first tap) or acc + w * row (later taps), in the compute type.
template <class R, class C>
inline void accumulate_tap(C* acc, const R* row, C w, int64_t d, bool first) {
  first ? scale(acc, row, w, d) : axpy(acc, row, w, d);
}

// acc = sum over output index i's taps of w * row(idx), left to right.
template <class C, class RowFn>
inline void sum_taps(C* acc, const AxisPlan& plan, int64_t i, RowFn row, int64_t d) {
  const auto b = static_cast<size_t>(plan.start[static_cast<size_t>(i)]);
  const auto e = static_cast<size_t>(plan.start[static_cast<size_t>(i) + 1]);
  using R = std::remove_cv_t<std::remove_pointer_t<decltype(row(int64_t{0}))>>;
  if constexpr (std::is_same_v<C, float> && std::is_same_v<R, float>) {
    // float rows: one pass over the output, its sums in registers (the same bits)
    constexpr size_t kMost = 32;
    if (e > b && e - b <= kMost) {
      const float* rows[kMost];
      float w[kMost];
      for (size_t k = b; k < e; ++k) {
        rows[k - b] = row(plan.idx[k]);
        w[k - b] = static_cast<float>(plan.w[k]);
      }
      taps_sum(acc, rows, w, static_cast<int64_t>(e - b), d);
      return;
    }
  }
  for (size_t k = b; k < e; ++k) {
    accumulate_tap(acc, row(plan.idx[k]), static_cast<C>(plan.w[k]), d, k == b);
  }
}

// Where four consecutive outputs of an axis can be summed at once
// (taps_sum4): groups[i] holds the steps of outputs i..i+3 (bit m: output
// m + 1 reads the window of output m one row further on, else the same rows)
// when each has the same 2 or 4 taps and each reads the rows of the one
// before it shifted by 0 or 1, else -1. Plain (not antialiased) upsampling
// groups everywhere, borders included (a clamped row repeats in the window).
std::vector<int8_t> axis_groups(const AxisPlan& plan) {
  const auto outputs = static_cast<int64_t>(plan.start.size()) - 1;
  std::vector<int8_t> groups(static_cast<size_t>(std::max<int64_t>(outputs, 0)), -1);
  auto at = [](const std::vector<int64_t>& v, int64_t k) { return v[static_cast<size_t>(k)]; };
  for (int64_t i = 0; i + 4 <= outputs; ++i) {
    const int64_t b = at(plan.start, i);
    const int64_t n = at(plan.start, i + 1) - b;
    if (n != 2 && n != 4) continue;
    int64_t window[7];
    int64_t len = n;
    for (int64_t t = 0; t < n; ++t) window[t] = at(plan.idx, b + t);
    int64_t s = 0;  // where the previous output's rows start in the window
    int steps = 0;
    bool ok = true;
    for (int64_t m = 1; m < 4 && ok; ++m) {
      const int64_t bm = at(plan.start, i + m);
      if (at(plan.start, i + m + 1) - bm != n) {
        ok = false;
        break;
      }
      bool same = true;
      for (int64_t t = 0; t < n; ++t) same = same && at(plan.idx, bm + t) == window[s + t];
      if (same) continue;
      bool next = true;  // the previous rows but the first, then one more
      for (int64_t t = 0; t + 1 < n; ++t) next = next && at(plan.idx, bm + t) == window[s + 1 + t];
      ok = next;
      if (next) {
        window[len++] = at(plan.idx, bm + n - 1);
        ++s;
        steps |= 1 << (m - 1);
      }
    }
    if (ok) groups[static_cast<size_t>(i)] = static_cast<int8_t>(steps);
  }
  return groups;
}

// Outputs [i0, i1) of an axis: dst(i) = sum_taps of its rows, four at a time
// where the groups allow and the rows and sums are float (the same bits).
template <class C, class RowFn, class DstFn>
void sum_taps_run(const AxisPlan& plan, const std::vector<int8_t>& groups, int64_t i0,
                  int64_t i1, RowFn row, DstFn dst, int64_t d) {
  using R = std::remove_cv_t<std::remove_pointer_t<decltype(row(int64_t{0}))>>;
  for (int64_t i = i0; i < i1;) {
    if constexpr (std::is_same_v<C, float> && std::is_same_v<R, float>) {
      const int steps = i + 4 <= i1 ? groups[static_cast<size_t>(i)] : -1;
      if (steps >= 0) {
        const auto first = static_cast<size_t>(i);
        const auto b = static_cast<size_t>(plan.start[first]);
        const auto n = static_cast<size_t>(plan.start[first + 1]) - b;
        const float* rows[7];
        float w[16];
        float* dsts[4];
        size_t len = 0;
        for (size_t t = 0; t < n; ++t) rows[len++] = row(plan.idx[b + t]);
        for (size_t m = 0; m < 4; ++m) {
          const auto bm = static_cast<size_t>(plan.start[first + m]);
          if (m > 0 && ((steps >> (m - 1)) & 1) != 0) rows[len++] = row(plan.idx[bm + n - 1]);
          for (size_t t = 0; t < n; ++t) w[m * n + t] = static_cast<float>(plan.w[bm + t]);
          dsts[m] = dst(i + static_cast<int64_t>(m));
        }
        taps_sum4(dsts, rows, w, static_cast<int>(n), steps, d);
        i += 4;
        continue;
      }
    } else {
      (void)groups;
    }
    sum_taps(dst(i), plan, i, row, d);
    ++i;
  }
}

// The x pass's rows, kept between calls on the same thread up to kKeptBytes:
// a new allocation of megabytes is new pages from the system on every call,
// and faulting them in took longer than the pass itself. Larger ones are
// allocated for the call. A calling thread holds at most kKeptBytes.
class ScratchBuffer {
 public:
  // Rows start on a cache line (kAlign bytes more are allocated for that): a
  // row read that straddles two lines costs two loads, and the y pass reads
  // each row of the scratch several times.
  template <class C>
  C* get(int64_t count) {
    const auto bytes = static_cast<size_t>(count) * sizeof(C) + kAlign;
    if (bytes > kKeptBytes) {
      own_.reset(new char[bytes]);
      return aligned<C>(own_.get());
    }
    Kept& k = kept();
    if (k.in_use) {  // a nested call on this thread: never, but never shared either
      own_.reset(new char[bytes]);
      return aligned<C>(own_.get());
    }
    if (k.size < bytes) {
      k.data.reset();  // the old block goes before the new one comes
      k.size = 0;
      k.data.reset(new char[bytes]);
      k.size = bytes;
    }
    k.in_use = true;
    borrowed_ = true;
    return aligned<C>(k.data.get());
  }
  ScratchBuffer() = default;
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  ~ScratchBuffer() {
    if (borrowed_) kept().in_use = false;
  }

 private:
  static constexpr size_t kKeptBytes = size_t{64} << 20;
  static constexpr size_t kAlign = 64;
  template <class C>
  static C* aligned(char* p) {
    const auto skip = (kAlign - reinterpret_cast<uintptr_t>(p) % kAlign) % kAlign;
    return reinterpret_cast<C*>(p + skip);
  }
  struct Kept {
    std::unique_ptr<char[]> data;
    size_t size = 0;
    bool in_use = false;
  };
  static Kept& kept() {
    thread_local Kept k;
    return k;
  }
  std::unique_ptr<char[]> own_;
  bool borrowed_ = false;
};

// The fused passes' pieces: kBand columns of the new grid (four outputs of
// the x pass at once where taps_sum4 applies), each row cut into as few
// chunks as keep a band's columns of the x pass within kColumnsBytes (a fifth
// of a 1 MiB L2, beside the grid rows they are read from), every chunk but
// the last a whole number of kChunkAlign elements.
constexpr int64_t kBand = 4;
constexpr int64_t kColumnsBytes = 192 << 10;
constexpr int64_t kChunkAlign = 16;

// The chunk length (elements of `size` bytes) for rows of d elements.
int64_t column_chunk(int64_t d, int64_t size, int64_t band, int64_t h) {
  const int64_t most = std::max(kChunkAlign, kColumnsBytes / (band * h * size));
  const int64_t chunks = (d + most - 1) / most;
  const int64_t even = (d + chunks - 1) / chunks;  // chunks of about equal length
  return std::min(d, (even + kChunkAlign - 1) / kChunkAlign * kChunkAlign);
}

// An antialiased axis whose size does not change: PyTorch leaves it alone.
bool unchanged(int64_t in_size, int64_t out_size, bool antialias) {
  return antialias && in_size == out_size;
}

template <class S>
void resample_typed(const RowsView& t, int64_t prefix, int64_t h, int64_t w, int64_t h2,
                    int64_t w2, GridMethod method, Align align, bool antialias, char* out) {
  using K = Compute<S>;
  using C = typename K::type;
  const int64_t d = t.cols;
  const int64_t row_bytes = d * static_cast<int64_t>(sizeof(S));

  for (int64_t r = 0; r < prefix; ++r) {
    std::memcpy(out + r * row_bytes, t.data + r * t.row_stride, static_cast<size_t>(row_bytes));
  }
  if (h2 * w2 == 0 || d == 0) return;
  char* grid_out = out + prefix * row_bytes;
  const bool keep_x = unchanged(w, w2, antialias);
  const bool keep_y = unchanged(h, h2, antialias);
  if (keep_x && keep_y) {
    for (int64_t r = 0; r < h * w; ++r) {
      std::memcpy(grid_out + r * row_bytes, t.data + (prefix + r) * t.row_stride,
                  static_cast<size_t>(row_bytes));
    }
    return;
  }

  const AxisPlan px = axis_plan(w, w2, method, align, antialias);
  const AxisPlan py = axis_plan(h, h2, method, align, antialias);

  auto grid_row = [&](int64_t y, int64_t x) {
    return reinterpret_cast<const S*>(t.data + (prefix + y * w + x) * t.row_stride);
  };

  // Output (y2, x2) of the y pass: sum_a wy[a] * row(y_a), accumulated in the
  // output row itself when it holds the compute type, else in scratch.
  auto out_row = [&](int64_t y2, int64_t x2) {
    return reinterpret_cast<S*>(grid_out + (y2 * w2 + x2) * row_bytes);
  };
  auto y_output = [&](int64_t y2, int64_t x2, int64_t c0, int64_t len, C* scratch, auto row) {
    S* dst = out_row(y2, x2) + c0;
    if constexpr (std::is_same_v<S, C>) {
      (void)scratch;
      sum_taps(dst, py, y2, row, len);
    } else {
      sum_taps(scratch, py, y2, row, len);
      store(dst, scratch, len);
    }
  };

  // Pass 2, along y: out[y2, x2] = sum_a wy[a] * src[y_a, x2].
  auto pass_y = [&](auto src_row) {
    const int64_t work2 = w2 * py.taps() * row_bytes;
    parallel_for(h2 * w2, threads_for_bytes(work2), [&](int64_t begin, int64_t end, int) {
      std::vector<C> scratch(std::is_same_v<S, C> ? 0 : static_cast<size_t>(d));
      // column by column (k = x2 * h2 + y2): the next output down a column
      // reads mostly the rows this one read, still in the core's cache
      for (int64_t k = begin; k < end; ++k) {
        const int64_t x2 = k / h2;
        y_output(k % h2, x2, 0, d, scratch.data(), [&](int64_t y) { return src_row(y, x2); });
      }
    });
  };

  if (keep_x) {
    // w2 == w: the y pass reads the grid itself.
    pass_y(grid_row);
    return;
  }

  // Both passes a band of kBand columns of the new grid at a time, and a
  // chunk of each row (see kColumnsBytes), where there are such pieces
  // enough for every thread: the band's columns of the x pass (h rows each,
  // held in the thread's cache), then the outputs down each of them from
  // those. Each product and sum is the one the two passes below make, so the
  // bits are the same; four outputs along an axis are made at once where
  // taps_sum4 applies (float tables). Bands of one column where four would
  // leave a thread idle.
  const int64_t work = (h * px.taps() + w2 * py.taps()) * d * static_cast<int64_t>(sizeof(C));
  const int team = threads_for_bytes(work);
  // The bands and chunks serve the groups of four outputs (float tables):
  // where there are none, a column and whole rows at a time.
  constexpr bool kFloat = std::is_same_v<S, float>;
  const std::vector<int8_t> gx = kFloat ? axis_groups(px) : std::vector<int8_t>{};
  const std::vector<int8_t> gy = kFloat ? axis_groups(py) : std::vector<int8_t>{};
  auto grouped = [](const std::vector<int8_t>& g) {
    return std::any_of(g.begin(), g.end(), [](int8_t steps) { return steps >= 0; });
  };
  const bool fours = grouped(gx) || grouped(gy);
  const auto elem = static_cast<int64_t>(sizeof(C));
  int64_t band = fours ? kBand : 1;
  int64_t chunk = fours ? column_chunk(d, elem, band, h) : d;
  if (band > 1 &&
      (w2 + band - 1) / band * ((d + chunk - 1) / chunk) < 2 * static_cast<int64_t>(team)) {
    band = 1;
    chunk = column_chunk(d, elem, band, h);
  }
  const int64_t pieces = (d + chunk - 1) / chunk;
  const int64_t bands = (w2 + band - 1) / band;
  if (bands * pieces >= 2 * static_cast<int64_t>(team)) {
    parallel_for(bands * pieces, team, [&](int64_t begin, int64_t end, int) {
      ScratchBuffer held;
      C* const columns = held.get<C>(band * h * chunk);
      std::vector<C> scratch(std::is_same_v<S, C> ? 0 : static_cast<size_t>(chunk));
      for (int64_t k = begin; k < end; ++k) {
        const int64_t x0 = k / pieces * band;
        const int64_t x1 = std::min(w2, x0 + band);
        const int64_t c0 = k % pieces * chunk;
        const int64_t len = std::min(chunk, d - c0);
        // rows of the band's columns at a stride of whole chunks (a short
        // last chunk's rows still start where a whole one's would)
        auto column_row = [&](int64_t x2, int64_t y) {
          return columns + ((x2 - x0) * h + y) * chunk;
        };
        for (int64_t y = 0; y < h; ++y) {
          sum_taps_run<C>(
              px, gx, x0, x1, [&](int64_t x) { return grid_row(y, x) + c0; },
              [&](int64_t x2) { return column_row(x2, y); }, len);
        }
        for (int64_t x2 = x0; x2 < x1; ++x2) {
          auto row = [&](int64_t y) { return static_cast<const C*>(column_row(x2, y)); };
          if constexpr (std::is_same_v<S, C>) {
            sum_taps_run<C>(
                py, gy, 0, h2, row, [&](int64_t y2) { return out_row(y2, x2) + c0; }, len);
          } else {
            for (int64_t y2 = 0; y2 < h2; ++y2) {
              y_output(y2, x2, c0, len, scratch.data(), row);
            }
          }
        }
      }
    });
    return;
  }

  // Pass 1, along x: tmp[y, x2] = sum_b wx[b] * grid[y, x_b], for every input y.
  // Uninitialised on purpose: every element is written before it is read.
  ScratchBuffer held;
  C* const tmp = held.get<C>(h * w2 * d);
  const int64_t work1 = h * px.taps() * d * static_cast<int64_t>(sizeof(C));
  parallel_for(h * w2, threads_for_bytes(work1), [&](int64_t begin, int64_t end, int) {
    for (int64_t k = begin; k < end; ++k) {
      const int64_t y = k / w2;
      sum_taps(tmp + k * d, px, k % w2, [&](int64_t x) { return grid_row(y, x); }, d);
    }
  });
  pass_y([&](int64_t y, int64_t x2) { return static_cast<const C*>(tmp + (y * w2 + x2) * d); });
}

}  // namespace

AxisPlan axis_plan(int64_t in_size, int64_t out_size, GridMethod method, Align align,
                   bool antialias) {
  AxisPlan plan;
  plan.start.reserve(static_cast<size_t>(out_size) + 1);
  plan.start.push_back(0);
  auto tap = [&](int64_t idx, double weight) {
    plan.idx.push_back(idx);
    plan.w.push_back(weight);
  };
  auto close = [&] { plan.start.push_back(plan.taps()); };

  if (antialias && in_size == out_size) {
    for (int64_t i = 0; i < out_size; ++i) {
      tap(i, 1.0);
      close();
    }
    return plan;
  }
  if (antialias) {
    // PyTorch's antialiased taps (align_corners=False): output i is centred
    // at scale * (i + 0.5) on the input axis; the filter is stretched by the
    // scale when shrinking, so every input row falls under some output's
    // support; the taps are the rows whose centres the support reaches,
    // cut at the borders, and their weights are normalised to sum to 1.
    // Computed in float64 and rounded once to the compute type.
    const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
    const double half = method == GridMethod::bicubic ? 2.0 : 1.0;
    const double support = scale >= 1.0 ? half * scale : half;
    const double invscale = scale >= 1.0 ? 1.0 / scale : 1.0;
    const int64_t most = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
    std::vector<double> wts;
    for (int64_t i = 0; i < out_size; ++i) {
      const double center = scale * (static_cast<double>(i) + 0.5);
      const int64_t lo = std::max(static_cast<int64_t>(center - support + 0.5), int64_t{0});
      const int64_t hi = std::min(static_cast<int64_t>(center + support + 0.5), in_size);
      const int64_t n = std::min(std::max(hi - lo, int64_t{0}), most);
      wts.assign(static_cast<size_t>(n), 0.0);
      double total = 0.0;
      for (int64_t j = 0; j < n; ++j) {
        const double x = (static_cast<double>(j + lo) - center + 0.5) * invscale;
        wts[static_cast<size_t>(j)] = antialias_filter(x, method);
        total += wts[static_cast<size_t>(j)];
      }
      for (int64_t j = 0; j < n; ++j) {
        const double wj = wts[static_cast<size_t>(j)];
        tap(lo + j, total != 0.0 ? wj / total : wj);
      }
      close();
    }
    return plan;
  }
  const int ntaps = method == GridMethod::bicubic ? 4 : 2;
  plan.idx.reserve(static_cast<size_t>(out_size * ntaps));
  plan.w.reserve(static_cast<size_t>(out_size * ntaps));
  for (int64_t i = 0; i < out_size; ++i) {
    const SourceCoord c = source_coord(i, in_size, out_size, align);
    if (method == GridMethod::bilinear) {
      // Both taps are always summed, as PyTorch's bilinear does: a source
      // clamped at 0 (half_pixel) still reads its neighbour with weight 0, so
      // an infinity there gives NaN (0 * inf) and -0.0 + 0 * x gives 0.0.
      // (interpolate and lerp, by contrast, copy a row exactly at weight 0.)
      const int64_t lo = std::min(std::max(c.q, int64_t{0}), in_size - 1);
      const double frac = c.q < 0 ? 0.0 : c.frac;
      tap(lo, 1.0 - frac);
      tap(std::min(lo + 1, in_size - 1), frac);
    } else {
      double w[4];
      cubic_weights(c.frac, w);
      for (int k = 0; k < 4; ++k) tap(clamp_index(c.q - 1 + k, in_size), w[k]);
    }
    close();
  }
  return plan;
}

int64_t resample_grid_flops(int64_t h, int64_t w, int64_t h2, int64_t w2, int64_t d,
                            GridMethod method, Align align, bool antialias) {
  // as resample_typed runs: an output element of t taps is t products and
  // t - 1 sums; the x pass (unless x is kept) makes h * w2 rows, the y pass
  // h2 * w2 (one tap each when y is kept); a kept grid is copied
  if (h2 * w2 == 0 || d == 0) return 0;
  const bool keep_x = unchanged(w, w2, antialias);
  const bool keep_y = unchanged(h, h2, antialias);
  if (keep_x && keep_y) return 0;
  const int64_t ty = axis_plan(h, h2, method, align, antialias).taps();
  int64_t flops = w2 * (2 * ty - h2);
  if (!keep_x) flops += h * (2 * axis_plan(w, w2, method, align, antialias).taps() - w2);
  return flops * d;
}

void resample_grid(const RowsView& table, FloatKind kind, int64_t prefix, int64_t h, int64_t w,
                   int64_t h2, int64_t w2, GridMethod method, Align align, bool antialias,
                   char* out) {
  with_float_kind(kind, [&](auto s) {
    using S = decltype(s);
    resample_typed<S>(table, prefix, h, w, h2, w2, method, align, antialias, out);
  });
}

void interpolate_antialias(const RowsView& table, FloatKind kind, int64_t length, char* out) {
  resample_grid(table, kind, 0, table.rows, 1, length, 1, GridMethod::bilinear,
                Align::half_pixel, true, out);
}

}  // namespace posembed
