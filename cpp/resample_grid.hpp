// resample_grid: 2-D resampling of a vision-transformer position table, a
// number of prefix rows (CLS, distillation tokens) followed by an (H, W) grid
// of rows in row-major order, to an (H2, W2) grid. Separable: each output row
// is sum_a wy[a] * (sum_b wx[b] * grid[y_a, x_b]) in the compute type.
#pragma once

#include <cstdint>

#include "interpolate.hpp"

namespace posembed {

enum class GridMethod : int { bilinear = 0, bicubic = 1 };

// The Keys cubic convolution constant PyTorch uses.
constexpr double kCubicA = -0.75;

// Tap rows and weights of one output index along one axis.
struct AxisTaps {
  int64_t idx[4];
  double w[4];
};
// Taps of every output index (bilinear: 2 taps, bicubic: 4 taps; indices
// clamped to the axis, so border rows repeat).
void axis_taps(int64_t in_size, int64_t out_size, GridMethod method, Align align, AxisTaps* taps);

// out: (prefix + H2 * W2, d), C-contiguous, the table's element type.
void resample_grid(const RowsView& table, FloatKind kind, int64_t prefix, int64_t h, int64_t w,
                   int64_t h2, int64_t w2, GridMethod method, Align align, char* out);

}  // namespace posembed
