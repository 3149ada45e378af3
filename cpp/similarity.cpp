#include "similarity.hpp"

#include <algorithm>
#include <type_traits>

#include "parallel.hpp"
#include "rowops.hpp"
#include "runtime.hpp"

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace posembed {

namespace {

// tile[(j - j0) * k + (i - i0)] = a[i][j] for a whole k x k block of a (k a
// multiple of 4) whose top left is (i0, j0): 4 x 4 (float) or 2 x 2 (double)
// register transposes; one element at a time without SSE2.
template <class T, int64_t k>
void transpose_into(T* tile, const T* a, int64_t n, int64_t i0, int64_t j0) {
  static_assert(k % 4 == 0);
#if defined(__SSE2__)
  if constexpr (std::is_same_v<T, float>) {
    for (int64_t i = 0; i < k; i += 4) {
      const float* src = a + (i0 + i) * n + j0;
      for (int64_t j = 0; j < k; j += 4) {
        __m128 r0 = _mm_loadu_ps(src + j);
        __m128 r1 = _mm_loadu_ps(src + n + j);
        __m128 r2 = _mm_loadu_ps(src + 2 * n + j);
        __m128 r3 = _mm_loadu_ps(src + 3 * n + j);
        _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
        float* dst = tile + j * k + i;
        _mm_storeu_ps(dst, r0);
        _mm_storeu_ps(dst + k, r1);
        _mm_storeu_ps(dst + 2 * k, r2);
        _mm_storeu_ps(dst + 3 * k, r3);
      }
    }
    return;
  } else {
    for (int64_t i = 0; i < k; i += 2) {
      const double* src = a + (i0 + i) * n + j0;
      for (int64_t j = 0; j < k; j += 2) {
        const __m128d r0 = _mm_loadu_pd(src + j);
        const __m128d r1 = _mm_loadu_pd(src + n + j);
        double* dst = tile + j * k + i;
        _mm_storeu_pd(dst, _mm_unpacklo_pd(r0, r1));
        _mm_storeu_pd(dst + k, _mm_unpackhi_pd(r0, r1));
      }
    }
    return;
  }
#endif
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j < k; ++j) tile[j * k + i] = a[(i0 + i) * n + j0 + j];
  }
}

}  // namespace

template <class T>
void unit_rows(const T* x, int64_t rows, int64_t cols, T* out) {
  const int64_t bytes = rows * cols * static_cast<int64_t>(sizeof(T));
  parallel_for(rows, threads_for_bytes(2 * bytes), [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* row = x + r * cols;
      T* dst = out + r * cols;
      const T peak = row_peak(row, cols);
      const T norm = row_length(row, cols, peak == T(0) ? T(1) : peak, dst);
      const T by = norm == T(0) ? T(1) : norm;
      for (int64_t k = 0; k < cols; ++k) dst[k] = dst[k] / by;
    }
  });
}

template <class T>
void row_scales(const T* x, int64_t rows, int64_t cols, T* peak, T* norm, int threads) {
  parallel_for(rows, threads, [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* row = x + r * cols;
      const T p = row_peak(row, cols);
      peak[r] = p;
      norm[r] = row_length(row, cols, p == T(0) ? T(1) : p);
    }
  });
}

template <class T>
void mirror_lower(T* a, int64_t n, const T* inv, int64_t r0, int64_t r1, int threads) {
  constexpr int64_t kTile = static_cast<int64_t>(256 / sizeof(T));  // rows of 256 bytes
  const int64_t tiles = (r1 - r0 + kTile - 1) / kTile;
  // tile row i (rows [i0, i1) of [r0, r1)): the tiles (i, j <= i) of the
  // lower triangle, each scaled and written transposed onto (j, i). The
  // transposition goes through a contiguous copy of the tile: read down a
  // column of the table itself, a row stride of a power of two bytes puts
  // every row of the tile in the same few cache sets.
  parallel_for(tiles, threads, [&](int64_t t0, int64_t t1, int) {
    alignas(64) T tile[static_cast<size_t>(kTile * kTile)];  // tile[(j - j0) * kTile + (i - i0)] = a[i][j]
    for (int64_t ti = t0; ti < t1; ++ti) {
      const int64_t i0 = r0 + ti * kTile, i1 = std::min(r1, i0 + kTile);
      for (int64_t j0 = 0; j0 < i1; j0 += kTile) {
        const int64_t j1 = std::min(n, j0 + kTile);
        // a whole tile below the diagonal is transposed in registers once
        // scaled; the others (the diagonal's, a ragged edge) element by element
        const bool whole = i1 - i0 == kTile && j1 - j0 == kTile && j1 <= i0;
        for (int64_t i = i0; i < i1; ++i) {
          T* row = a + i * n;
          const int64_t end = std::min(j1, i + 1);
          if (inv != nullptr) {
            const T by = inv[i];
            for (int64_t j = j0; j < end; ++j) row[j] = row[j] * by * inv[j];
          }
          if (!whole) {
            T* column = tile + (i - i0);
            for (int64_t j = j0; j < end; ++j) column[(j - j0) * kTile] = row[j];
          }
        }
        if (whole) transpose_into<T, kTile>(tile, a, n, i0, j0);
        // upper tile (j0, i0) row by row, strictly above the diagonal
        for (int64_t j = j0; j < j1; ++j) {
          T* dst = a + j * n;
          const T* src = tile + (j - j0) * kTile;
          for (int64_t i = std::max(i0, j + 1); i < i1; ++i) dst[i] = src[i - i0];
        }
      }
    }
  });
}

template void unit_rows<float>(const float*, int64_t, int64_t, float*);
template void unit_rows<double>(const double*, int64_t, int64_t, double*);
template void row_scales<float>(const float*, int64_t, int64_t, float*, float*, int);
template void row_scales<double>(const double*, int64_t, int64_t, double*, double*, int);
template void mirror_lower<float>(float*, int64_t, const float*, int64_t, int64_t, int);
template void mirror_lower<double>(double*, int64_t, const double*, int64_t, int64_t, int);

}  // namespace posembed
