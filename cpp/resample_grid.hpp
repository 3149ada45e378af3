// resample_grid: 2-D resampling of a vision-transformer position table, a
// number of prefix rows (CLS, distillation tokens) followed by an (H, W) grid
// of rows in row-major order, to an (H2, W2) grid. Separable: each output row
// is sum_a wy[a] * (sum_b wx[b] * grid[y_a, x_b]) in the compute type.
#pragma once

#include <cstdint>
#include <vector>

#include "interpolate.hpp"

namespace posembed {

enum class GridMethod : int { bilinear = 0, bicubic = 1 };

// The Keys cubic convolution constants PyTorch uses: -0.75 for its plain
// bicubic, -0.5 for the antialiased one (as Pillow).
constexpr double kCubicA = -0.75;
constexpr double kCubicAntialiasA = -0.5;

// The taps of every output index along one axis: output i sums
// w[k] * row idx[k] for k in [start[i], start[i + 1]), left to right, in the
// compute type. Plain filters have 2 (bilinear) or 4 (bicubic) taps per index,
// their indices clamped to the axis so that border rows repeat; antialiased
// ones a run of consecutive rows whose length varies with the index.
struct AxisPlan {
  std::vector<int64_t> start;  // out_size + 1 offsets into idx and w
  std::vector<int64_t> idx;
  std::vector<double> w;
  int64_t taps() const { return static_cast<int64_t>(idx.size()); }
};
AxisPlan axis_plan(int64_t in_size, int64_t out_size, GridMethod method, Align align,
                   bool antialias);

// The float multiplies and adds resample_grid does for an (h, w) -> (h2, w2)
// grid of rows of d elements (the benchmark's compute roofline counts them).
int64_t resample_grid_flops(int64_t h, int64_t w, int64_t h2, int64_t w2, int64_t d,
                            GridMethod method, Align align, bool antialias);

// out: (prefix + H2 * W2, d), C-contiguous, the table's element type.
// antialias (half_pixel only): PyTorch's antialiased filters, whose support
// widens by in / out when shrinking (bicubic with A = -0.5); an axis whose
// size does not change is left as it is, as PyTorch skips it.
void resample_grid(const RowsView& table, FloatKind kind, int64_t prefix, int64_t h, int64_t w,
                   int64_t h2, int64_t w2, GridMethod method, Align align, bool antialias,
                   char* out);

// interpolate's antialias mode: the L rows as an (L, 1) grid resampled to
// (length, 1) with the antialiased bilinear filter; out (length, d).
void interpolate_antialias(const RowsView& table, FloatKind kind, int64_t length, char* out);

}  // namespace posembed
