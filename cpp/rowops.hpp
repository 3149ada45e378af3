// Row operations of the float kernels. rowops.cpp compiles each for the
// x86-64 baseline and for AVX2 and the best is chosen when the module loads
// (GCC function multi-versioning; no build for the host CPU). No FMA
// anywhere: every product rounds before its sum, exactly as in the NumPy
// twins, so all SIMD levels give the same bits.
#pragma once

#include <cstdint>

namespace posembed {

// dst = wa * a + wb * b
void blend(float* dst, const float* a, const float* b, float wa, float wb, int64_t d);
void blend(double* dst, const double* a, const double* b, double wa, double wb, int64_t d);
// blend written with streaming (non-temporal) stores for every whole 64-byte
// line of dst (ordinary stores for the partial lines at either end); same
// values as blend. Call stream_fence() before another thread reads dst.
void blend_stream(float* dst, const float* a, const float* b, float wa, float wb, int64_t d);
// dst = w * x
void scale(float* dst, const float* x, float w, int64_t d);
void scale(double* dst, const double* x, double w, int64_t d);
// dst = dst + w * x
void axpy(float* dst, const float* x, float w, int64_t d);
void axpy(double* dst, const double* x, double w, int64_t d);
// dst = a + b
void add(float* dst, const float* a, const float* b, int64_t d);
void add(double* dst, const double* a, const double* b, int64_t d);
// dst = dst + x
void accumulate(float* dst, const float* x, int64_t d);
void accumulate(double* dst, const double* x, int64_t d);
// Inverted dropout of a sum: dst = u >= threshold ? (a + b) * scale : 0.
void dropout_add(float* dst, const float* a, const float* b, const uint32_t* u,
                 uint32_t threshold, float scale, int64_t d);
void dropout_add(double* dst, const double* a, const double* b, const uint32_t* u,
                 uint32_t threshold, double scale, int64_t d);
// dropout_add with streaming stores, as blend_stream (same values).
void dropout_add_stream(float* dst, const float* a, const float* b, const uint32_t* u,
                        uint32_t threshold, float scale, int64_t d);

}  // namespace posembed
