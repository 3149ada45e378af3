// Row operations: the arithmetic of every float kernel. rowops.cpp compiles
// them for each SIMD level from one source (rowops.simd.inc) and each call
// runs the copy for the level chosen at load (simd.hpp). No FMA anywhere:
// every product rounds before its sum, exactly as in the NumPy twins, so all
// levels give the same bits.
//
// float16 and bfloat16 rows are computed in float32 (their compute type)
// and rounded once, to nearest even, when stored.
#pragma once

#include <cstdint>

#include "half.hpp"

namespace posembed {

// dst = wa * a + wb * b
void blend(float* dst, const float* a, const float* b, float wa, float wb, int64_t d);
void blend(double* dst, const double* a, const double* b, double wa, double wb, int64_t d);
void blend(f16* dst, const f16* a, const f16* b, float wa, float wb, int64_t d);
void blend(bf16* dst, const bf16* a, const bf16* b, float wa, float wb, int64_t d);
// blend written with streaming (non-temporal) stores for every whole 64-byte
// line of dst (ordinary stores for the partial lines at either end); same
// values as blend. Call stream_fence() before another thread reads dst.
void blend_stream(float* dst, const float* a, const float* b, float wa, float wb, int64_t d);
// dst = w * x, in the compute type of x
void scale(float* dst, const float* x, float w, int64_t d);
void scale(double* dst, const double* x, double w, int64_t d);
void scale(float* dst, const f16* x, float w, int64_t d);
void scale(float* dst, const bf16* x, float w, int64_t d);
// dst = dst + w * x
void axpy(float* dst, const float* x, float w, int64_t d);
void axpy(double* dst, const double* x, double w, int64_t d);
void axpy(float* dst, const f16* x, float w, int64_t d);
void axpy(float* dst, const bf16* x, float w, int64_t d);
// dst = a + b
void add(float* dst, const float* a, const float* b, int64_t d);
void add(double* dst, const double* a, const double* b, int64_t d);
void add(f16* dst, const f16* a, const f16* b, int64_t d);
void add(bf16* dst, const bf16* a, const bf16* b, int64_t d);
// dst = dst + x
void accumulate(float* dst, const float* x, int64_t d);
void accumulate(double* dst, const double* x, int64_t d);
void accumulate(float* dst, const f16* x, int64_t d);
void accumulate(float* dst, const bf16* x, int64_t d);
// dst = dst + x modulo 2^64; true when some element's sum wrapped
bool accumulate_wraps(int64_t* dst, const int64_t* x, int64_t d);
bool accumulate_wraps(uint64_t* dst, const uint64_t* x, int64_t d);
// dst = x rounded to nearest even
void store(f16* dst, const float* x, int64_t d);
void store(bf16* dst, const float* x, int64_t d);
// Inverted dropout of a sum: dst = u >= threshold ? (a + b) * scale : +0.
void dropout_add(float* dst, const float* a, const float* b, const uint32_t* u,
                 uint32_t threshold, float scale, int64_t d);
void dropout_add(double* dst, const double* a, const double* b, const uint32_t* u,
                 uint32_t threshold, double scale, int64_t d);
void dropout_add(f16* dst, const f16* a, const f16* b, const uint32_t* u, uint32_t threshold,
                 float scale, int64_t d);
void dropout_add(bf16* dst, const bf16* a, const bf16* b, const uint32_t* u,
                 uint32_t threshold, float scale, int64_t d);
// dropout_add with streaming stores, as blend_stream (same values).
void dropout_add_stream(float* dst, const float* a, const float* b, const uint32_t* u,
                        uint32_t threshold, float scale, int64_t d);
// mask[k] = u[k] >= threshold
void keep_mask(bool* mask, const uint32_t* u, uint32_t threshold, int64_t n);

// dst = sum of w[t] * rows[t] over t < n (n >= 1), left to right: the bits
// of scale() then axpy() per row, the sum held in registers.
void taps_sum(float* dst, const float* const* rows, const float* w, int64_t n, int64_t d);

// Four outputs of taps_sum at once, each of n (2 or 4) consecutive rows of
// one window: dst[m] = sum over t < n of w[m * n + t] * rows[s_m + t], with
// s_0 = 0 and s_(m+1) = s_m + bit m of `steps` (0 or 1); rows holds the
// n + s_3 rows of the window. The bits of taps_sum for each output; each row
// is loaded once for all four.
void taps_sum4(float* const* dst, const float* const* rows, const float* w, int n, int steps,
               int64_t d);

// dst = sum of rows[t] over t < n (n >= 1), left to right from +0: the bits
// of zeroing dst and then accumulate() per row, the sum held in registers.
void sum_rows(float* dst, const float* const* rows, int64_t n, int64_t d);

// The compute roofline's loop at the level in use: `steps` steps of 12
// independent vector chains of multiplies by a and adds of b (fused:
// multiply-adds), and the float operations one step does (an FMA is two).
float flops_loop(int64_t steps, float a, float b, bool fused);
int64_t flops_per_step(bool fused);
// dst = max(dst, x); a NaN in either wins
void maximum(float* dst, const float* x, int64_t d);
void maximum(double* dst, const double* x, int64_t d);
void maximum(int64_t* dst, const int64_t* x, int64_t d);
void maximum(uint64_t* dst, const uint64_t* x, int64_t d);
// The largest magnitude in x, or NaN when x holds one.
float row_peak(const float* x, int64_t d);
double row_peak(const double* x, int64_t d);
// The square root of the sum of (x[j] / by)^2 over j, the squares summed in
// eight partial sums (j % 8) added in order at the end; dst, when given,
// receives the quotients x[j] / by.
float row_length(const float* x, int64_t d, float by, float* dst = nullptr);
double row_length(const double* x, int64_t d, double by, double* dst = nullptr);
// dst = dst / c (integer division for integers)
void divide(float* dst, float c, int64_t d);
void divide(double* dst, double c, int64_t d);
void divide(int64_t* dst, int64_t c, int64_t d);
void divide(uint64_t* dst, uint64_t c, int64_t d);

}  // namespace posembed
