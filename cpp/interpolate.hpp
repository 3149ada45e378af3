// interpolate and lerp: rows of a table at fractional positions, linear
// between the two nearest rows. interpolate stretches or shrinks a table to
// T rows under one of three index conventions; lerp takes the positions.
#pragma once

#include <cstdint>

#include "half.hpp"

namespace posembed {

// A table of float rows: element [r, j] at data + r * row_stride + j * sizeof(S).
struct RowsView {
  const char* data;
  int64_t rows;
  int64_t cols;
  int64_t row_stride;  // bytes, may be negative
};

enum class Align : int {
  scale = 0,       // s = i * L / T (position interpolation)
  half_pixel = 1,  // s = (i + 0.5) * L / T - 0.5  (PyTorch align_corners=False)
  corners = 2,     // s = i * (L - 1) / (T - 1)    (PyTorch align_corners=True)
};

// Output row = (1 - w) * row[lo] + w * row[hi]; a copy of row[lo] when w == 0
// or lo == hi.
struct LinearTap {
  int64_t lo;
  int64_t hi;
  double w;
};

// The exact source coordinate of output index i as floor and fraction:
// s = q + frac with integer q (may be negative for half_pixel) and
// frac = rem / den in [0, 1), from integer arithmetic, so that, for example,
// T = k * L lands exactly on every k-th row.
struct SourceCoord {
  int64_t q;
  double frac;
};
SourceCoord source_coord(int64_t i, int64_t in_size, int64_t out_size, Align align);

// The linear tap at source coordinate c on an axis of `in_size` (a negative
// coordinate, from half_pixel, clamps to 0 as PyTorch's linear modes do).
LinearTap linear_tap(SourceCoord c, int64_t in_size);

// Rows [first, length) of the table interpolated to `length` rows, written to
// out (length - first, d), C-contiguous, of the table's element type.
// `out_just_allocated`: the caller allocated out for this call, so streaming
// stores would gain nothing (see use_streaming).
void interpolate(const RowsView& table, FloatKind kind, int64_t length, Align align,
                 int64_t first, char* out, bool out_just_allocated);

// Flat index of the first position that is not finite or not in [0, L-1], or -1.
int64_t first_invalid_fraction(const double* pos, int64_t n, int64_t rows);

// out (n, d) = rows at positions pos[0..n) (all valid, see above).
void lerp(const RowsView& table, FloatKind kind, const double* pos, int64_t n, char* out,
          bool out_just_allocated);

}  // namespace posembed
