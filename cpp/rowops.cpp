#include "rowops.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "half.hpp"
#include "simd.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

// One copy of the row operations per SIMD level (see simd.hpp).
#define POSEMBED_SIMD_SOURCE "rowops.simd.inc"
#include "simd_levels.inc"
#undef POSEMBED_SIMD_SOURCE

namespace posembed {

namespace {

// The level, read once at load (simd_level() caches it too; this copy keeps
// each call to a load and a predictable branch).
const SimdLevel g_level = simd_level();

}  // namespace

#if POSEMBED_SIMD_DISPATCH
#define POSEMBED_DISPATCH(call)            \
  switch (g_level) {                       \
    case SimdLevel::avx512:                \
      return simd_avx512::call;            \
    case SimdLevel::avx2:                  \
      return simd_avx2::call;              \
    case SimdLevel::baseline:              \
      break;                               \
  }                                        \
  return simd_baseline::call
#else
#define POSEMBED_DISPATCH(call) \
  (void)g_level;                \
  return simd_baseline::call
#endif

void blend(float* dst, const float* a, const float* b, float wa, float wb, int64_t d) {
  POSEMBED_DISPATCH(blend(dst, a, b, wa, wb, d));
}
void blend(double* dst, const double* a, const double* b, double wa, double wb, int64_t d) {
  POSEMBED_DISPATCH(blend(dst, a, b, wa, wb, d));
}
void blend(f16* dst, const f16* a, const f16* b, float wa, float wb, int64_t d) {
  POSEMBED_DISPATCH(blend(dst, a, b, wa, wb, d));
}
void blend(bf16* dst, const bf16* a, const bf16* b, float wa, float wb, int64_t d) {
  POSEMBED_DISPATCH(blend(dst, a, b, wa, wb, d));
}
void blend_stream(float* dst, const float* a, const float* b, float wa, float wb, int64_t d) {
  POSEMBED_DISPATCH(blend_stream(dst, a, b, wa, wb, d));
}

void scale(float* dst, const float* x, float w, int64_t d) { POSEMBED_DISPATCH(scale(dst, x, w, d)); }
void scale(double* dst, const double* x, double w, int64_t d) {
  POSEMBED_DISPATCH(scale(dst, x, w, d));
}
void scale(float* dst, const f16* x, float w, int64_t d) { POSEMBED_DISPATCH(scale(dst, x, w, d)); }
void scale(float* dst, const bf16* x, float w, int64_t d) { POSEMBED_DISPATCH(scale(dst, x, w, d)); }

void axpy(float* dst, const float* x, float w, int64_t d) { POSEMBED_DISPATCH(axpy(dst, x, w, d)); }
void axpy(double* dst, const double* x, double w, int64_t d) {
  POSEMBED_DISPATCH(axpy(dst, x, w, d));
}
void axpy(float* dst, const f16* x, float w, int64_t d) { POSEMBED_DISPATCH(axpy(dst, x, w, d)); }
void axpy(float* dst, const bf16* x, float w, int64_t d) { POSEMBED_DISPATCH(axpy(dst, x, w, d)); }

void add(float* dst, const float* a, const float* b, int64_t d) { POSEMBED_DISPATCH(add(dst, a, b, d)); }
void add(double* dst, const double* a, const double* b, int64_t d) {
  POSEMBED_DISPATCH(add(dst, a, b, d));
}
void add(f16* dst, const f16* a, const f16* b, int64_t d) { POSEMBED_DISPATCH(add(dst, a, b, d)); }
void add(bf16* dst, const bf16* a, const bf16* b, int64_t d) { POSEMBED_DISPATCH(add(dst, a, b, d)); }

void accumulate(float* dst, const float* x, int64_t d) { POSEMBED_DISPATCH(accumulate(dst, x, d)); }
void accumulate(double* dst, const double* x, int64_t d) { POSEMBED_DISPATCH(accumulate(dst, x, d)); }
void accumulate(float* dst, const f16* x, int64_t d) { POSEMBED_DISPATCH(accumulate(dst, x, d)); }
void accumulate(float* dst, const bf16* x, int64_t d) { POSEMBED_DISPATCH(accumulate(dst, x, d)); }
bool accumulate_wraps(int64_t* dst, const int64_t* x, int64_t d) {
  POSEMBED_DISPATCH(accumulate_wraps(dst, x, d));
}
bool accumulate_wraps(uint64_t* dst, const uint64_t* x, int64_t d) {
  POSEMBED_DISPATCH(accumulate_wraps(dst, x, d));
}

void store(f16* dst, const float* x, int64_t d) { POSEMBED_DISPATCH(store(dst, x, d)); }
void store(bf16* dst, const float* x, int64_t d) { POSEMBED_DISPATCH(store(dst, x, d)); }

void dropout_add(float* dst, const float* a, const float* b, const uint32_t* u,
                 uint32_t threshold, float scale, int64_t d) {
  POSEMBED_DISPATCH(dropout_add(dst, a, b, u, threshold, scale, d));
}
void dropout_add(double* dst, const double* a, const double* b, const uint32_t* u,
                 uint32_t threshold, double scale, int64_t d) {
  POSEMBED_DISPATCH(dropout_add(dst, a, b, u, threshold, scale, d));
}
void dropout_add(f16* dst, const f16* a, const f16* b, const uint32_t* u, uint32_t threshold,
                 float scale, int64_t d) {
  POSEMBED_DISPATCH(dropout_add(dst, a, b, u, threshold, scale, d));
}
void dropout_add(bf16* dst, const bf16* a, const bf16* b, const uint32_t* u,
                 uint32_t threshold, float scale, int64_t d) {
  POSEMBED_DISPATCH(dropout_add(dst, a, b, u, threshold, scale, d));
}
void dropout_add_stream(float* dst, const float* a, const float* b, const uint32_t* u,
                        uint32_t threshold, float scale, int64_t d) {
  POSEMBED_DISPATCH(dropout_add_stream(dst, a, b, u, threshold, scale, d));
}

void taps_sum(float* dst, const float* const* rows, const float* w, int64_t n, int64_t d) {
  POSEMBED_DISPATCH(taps_sum(dst, rows, w, n, d));
}
void taps_sum4(float* const* dst, const float* const* rows, const float* w, int n, int steps,
               int64_t d) {
  POSEMBED_DISPATCH(taps_sum4(dst, rows, w, n, steps, d));
}
void sum_rows(float* dst, const float* const* rows, int64_t n, int64_t d) {
  POSEMBED_DISPATCH(sum_rows(dst, rows, n, d));
}
float flops_loop(int64_t steps, float a, float b, bool fused) {
  POSEMBED_DISPATCH(flops_loop(steps, a, b, fused));
}
int64_t flops_per_step(bool fused) { POSEMBED_DISPATCH(flops_per_step(fused)); }

void keep_mask(bool* mask, const uint32_t* u, uint32_t threshold, int64_t n) {
  POSEMBED_DISPATCH(keep_mask(mask, u, threshold, n));
}

void maximum(float* dst, const float* x, int64_t d) { POSEMBED_DISPATCH(maximum(dst, x, d)); }
void maximum(double* dst, const double* x, int64_t d) { POSEMBED_DISPATCH(maximum(dst, x, d)); }
void maximum(int64_t* dst, const int64_t* x, int64_t d) { POSEMBED_DISPATCH(maximum(dst, x, d)); }
void maximum(uint64_t* dst, const uint64_t* x, int64_t d) { POSEMBED_DISPATCH(maximum(dst, x, d)); }

float row_peak(const float* x, int64_t d) { POSEMBED_DISPATCH(row_peak(x, d)); }
double row_peak(const double* x, int64_t d) { POSEMBED_DISPATCH(row_peak(x, d)); }
float row_length(const float* x, int64_t d, float by, float* dst) {
  POSEMBED_DISPATCH(row_length(x, d, by, dst));
}
double row_length(const double* x, int64_t d, double by, double* dst) {
  POSEMBED_DISPATCH(row_length(x, d, by, dst));
}

void divide(float* dst, float c, int64_t d) { POSEMBED_DISPATCH(divide(dst, c, d)); }
void divide(double* dst, double c, int64_t d) { POSEMBED_DISPATCH(divide(dst, c, d)); }
void divide(int64_t* dst, int64_t c, int64_t d) { POSEMBED_DISPATCH(divide(dst, c, d)); }
void divide(uint64_t* dst, uint64_t c, int64_t d) { POSEMBED_DISPATCH(divide(dst, c, d)); }

#undef POSEMBED_DISPATCH

}  // namespace posembed
