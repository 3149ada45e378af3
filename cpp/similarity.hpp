// The two passes of similarity that are not the Gram product (which runs in
// NumPy's BLAS): every row scaled to unit length, and the lower triangle of
// the product mirrored into the upper one (only the lower one is computed).
#pragma once

#include <cstdint>

namespace posembed {

// out row r = x row r / peak / norm, where peak is the row's largest
// magnitude (NaN when the row holds one; 1 in place of 0) and norm the
// square root of the sum of the scaled row's squares, summed in a fixed
// order (1 in place of 0): a zero row stays zero. T is float or double.
template <class T>
void unit_rows(const T* x, int64_t rows, int64_t cols, T* out);

// Each row's largest magnitude (NaN when it holds one) into peak, and the
// length of the row divided by it (1 where the peak is 0) into norm, summed
// in the same fixed order as unit_rows.
template <class T>
void row_scales(const T* x, int64_t rows, int64_t cols, T* peak, T* norm, int threads);

// a[i, j] = a[i, j] * inv[i] * inv[j] for every i >= j of the n x n
// row-major matrix a, and a[j, i] = a[i, j]: the lower triangle scaled and
// copied onto the upper, a tile at a time (inv may be null: no scaling).
template <class T>
void mirror_lower(T* a, int64_t n, const T* inv, int64_t r0, int64_t r1, int threads);

}  // namespace posembed
