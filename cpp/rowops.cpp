#include "rowops.hpp"

#include <cstdint>
#include <cstring>

#include "runtime.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

// The attribute sits on the definitions only: callers elsewhere see a plain
// function (the resolver), as multi-versioning across files requires.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define POSEMBED_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define POSEMBED_CLONES
#endif

namespace posembed {

namespace {

template <class T>
inline void blend_t(T* dst, const T* a, const T* b, T wa, T wb, int64_t d) {
  for (int64_t j = 0; j < d; ++j) dst[j] = wa * a[j] + wb * b[j];
}

template <class T>
inline void scale_t(T* dst, const T* x, T w, int64_t d) {
  for (int64_t j = 0; j < d; ++j) dst[j] = w * x[j];
}

template <class T>
inline void axpy_t(T* dst, const T* x, T w, int64_t d) {
  for (int64_t j = 0; j < d; ++j) dst[j] = dst[j] + w * x[j];
}

template <class T>
inline void add_t(T* dst, const T* a, const T* b, int64_t d) {
  for (int64_t j = 0; j < d; ++j) dst[j] = a[j] + b[j];
}

template <class T>
inline void accumulate_t(T* dst, const T* x, int64_t d) {
  for (int64_t j = 0; j < d; ++j) dst[j] = dst[j] + x[j];
}

template <class T>
struct SameSizeUint;
template <>
struct SameSizeUint<float> {
  using type = uint32_t;
};
template <>
struct SameSizeUint<double> {
  using type = uint64_t;
};

template <class T>
inline void dropout_add_t(T* __restrict dst, const T* __restrict a, const T* __restrict b,
                          const uint32_t* __restrict u, uint32_t threshold, T scale, int64_t d) {
  // Every value is computed, then its bits are kept or cleared by a mask from
  // the comparison: no branch per element, and the loop vectorises. A
  // dropped slot is +0 whatever the sum (even an infinity or a NaN).
  using U = typename SameSizeUint<T>::type;
  for (int64_t j = 0; j < d; ++j) {
    const T v = (a[j] + b[j]) * scale;
    U bits;
    std::memcpy(&bits, &v, sizeof bits);
    bits &= U(0) - static_cast<U>(u[j] >= threshold);
    std::memcpy(dst + j, &bits, sizeof bits);
  }
}

}  // namespace

POSEMBED_CLONES void blend(float* dst, const float* a, const float* b, float wa, float wb,
                           int64_t d) {
  blend_t(dst, a, b, wa, wb, d);
}
POSEMBED_CLONES void blend(double* dst, const double* a, const double* b, double wa, double wb,
                           int64_t d) {
  blend_t(dst, a, b, wa, wb, d);
}
namespace {

// Elements before dst reaches a 64-byte boundary (at most d).
inline int64_t head_elements(const float* dst, int64_t d) {
  const auto mis = reinterpret_cast<uintptr_t>(dst) & 63u;
  if (mis % sizeof(float) != 0) return d;  // cannot align: ordinary stores only
  const auto head = static_cast<int64_t>(((64u - mis) & 63u) / sizeof(float));
  return head < d ? head : d;
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) void blend_stream_avx2(float* dst, const float* a,
                                                       const float* b, float wa, float wb,
                                                       int64_t d) {
  const int64_t head = head_elements(dst, d);
  blend_t(dst, a, b, wa, wb, head);
  const __m256 va = _mm256_set1_ps(wa);
  const __m256 vb = _mm256_set1_ps(wb);
  int64_t j = head;
  for (; j + 16 <= d; j += 16) {
    const __m256 x0 = _mm256_add_ps(_mm256_mul_ps(va, _mm256_loadu_ps(a + j)),
                                    _mm256_mul_ps(vb, _mm256_loadu_ps(b + j)));
    const __m256 x1 = _mm256_add_ps(_mm256_mul_ps(va, _mm256_loadu_ps(a + j + 8)),
                                    _mm256_mul_ps(vb, _mm256_loadu_ps(b + j + 8)));
    _mm256_stream_ps(dst + j, x0);
    _mm256_stream_ps(dst + j + 8, x1);
  }
  blend_t(dst + j, a + j, b + j, wa, wb, d - j);
}
#endif

void blend_stream_sse2(float* dst, const float* a, const float* b, float wa, float wb,
                       int64_t d) {
#if defined(__SSE2__)
  const int64_t head = head_elements(dst, d);
  blend_t(dst, a, b, wa, wb, head);
  const __m128 va = _mm_set1_ps(wa);
  const __m128 vb = _mm_set1_ps(wb);
  int64_t j = head;
  for (; j + 16 <= d; j += 16) {
    for (int k = 0; k < 16; k += 4) {
      const __m128 x = _mm_add_ps(_mm_mul_ps(va, _mm_loadu_ps(a + j + k)),
                                  _mm_mul_ps(vb, _mm_loadu_ps(b + j + k)));
      _mm_stream_ps(dst + j + k, x);
    }
  }
  blend_t(dst + j, a + j, b + j, wa, wb, d - j);
#else
  blend_t(dst, a, b, wa, wb, d);
#endif
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) void dropout_add_stream_avx2(float* dst, const float* a,
                                                             const float* b, const uint32_t* u,
                                                             uint32_t threshold, float scale,
                                                             int64_t d) {
  const int64_t head = head_elements(dst, d);
  dropout_add_t(dst, a, b, u, threshold, scale, head);
  const __m256 vs = _mm256_set1_ps(scale);
  const __m256i vt = _mm256_set1_epi32(static_cast<int>(threshold));
  int64_t j = head;
  for (; j + 8 <= d; j += 8) {
    const __m256 v = _mm256_mul_ps(_mm256_add_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j)), vs);
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(u + j));
    // u >= t exactly when max(u, t) == u (unsigned)
    const __m256i keep = _mm256_cmpeq_epi32(_mm256_max_epu32(bits, vt), bits);
    _mm256_stream_ps(dst + j, _mm256_and_ps(v, _mm256_castsi256_ps(keep)));
  }
  dropout_add_t(dst + j, a + j, b + j, u + j, threshold, scale, d - j);
}
#endif

void dropout_add_stream_sse2(float* dst, const float* a, const float* b, const uint32_t* u,
                             uint32_t threshold, float scale, int64_t d) {
#if defined(__SSE2__)
  const int64_t head = head_elements(dst, d);
  dropout_add_t(dst, a, b, u, threshold, scale, head);
  const __m128 vs = _mm_set1_ps(scale);
  // unsigned u >= t is !(t > u), compared signed after flipping the sign bits
  const __m128i sign = _mm_set1_epi32(static_cast<int>(0x80000000u));
  const __m128i vt = _mm_xor_si128(_mm_set1_epi32(static_cast<int>(threshold)), sign);
  int64_t j = head;
  for (; j + 4 <= d; j += 4) {
    const __m128 v = _mm_mul_ps(_mm_add_ps(_mm_loadu_ps(a + j), _mm_loadu_ps(b + j)), vs);
    const __m128i bits =
        _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(u + j)), sign);
    const __m128i drop = _mm_cmpgt_epi32(vt, bits);
    _mm_stream_ps(dst + j, _mm_andnot_ps(_mm_castsi128_ps(drop), v));
  }
  dropout_add_t(dst + j, a + j, b + j, u + j, threshold, scale, d - j);
#else
  dropout_add_t(dst, a, b, u, threshold, scale, d);
#endif
}

// The streamed versions have an AVX2 and an SSE2 build; the AVX2 one runs
// where the CPU has it, unless POSEMBED_SIMD=baseline forces SSE2 (tests use
// it to check that both give the same bytes).
bool avx2_streams() {
#if defined(__x86_64__) && defined(__GNUC__)
  const bool baseline = simd_baseline_forced();
  __builtin_cpu_init();
  return !baseline && __builtin_cpu_supports("avx2");
#else
  return false;
#endif
}

#if defined(__x86_64__) && defined(__GNUC__)
#define POSEMBED_PICK(name) (avx2_streams() ? name##_avx2 : name##_sse2)
#else
#define POSEMBED_PICK(name) (name##_sse2)
#endif

using DropoutFn = void (*)(float*, const float*, const float*, const uint32_t*, uint32_t, float,
                           int64_t);
const DropoutFn g_dropout_add_stream = POSEMBED_PICK(dropout_add_stream);

using BlendFn = void (*)(float*, const float*, const float*, float, float, int64_t);
const BlendFn g_blend_stream = POSEMBED_PICK(blend_stream);

#undef POSEMBED_PICK

}  // namespace

void blend_stream(float* dst, const float* a, const float* b, float wa, float wb, int64_t d) {
  g_blend_stream(dst, a, b, wa, wb, d);
}

void dropout_add_stream(float* dst, const float* a, const float* b, const uint32_t* u,
                        uint32_t threshold, float scale, int64_t d) {
  g_dropout_add_stream(dst, a, b, u, threshold, scale, d);
}

POSEMBED_CLONES void scale(float* dst, const float* x, float w, int64_t d) { scale_t(dst, x, w, d); }
POSEMBED_CLONES void scale(double* dst, const double* x, double w, int64_t d) {
  scale_t(dst, x, w, d);
}
POSEMBED_CLONES void axpy(float* dst, const float* x, float w, int64_t d) { axpy_t(dst, x, w, d); }
POSEMBED_CLONES void axpy(double* dst, const double* x, double w, int64_t d) {
  axpy_t(dst, x, w, d);
}

POSEMBED_CLONES void add(float* dst, const float* a, const float* b, int64_t d) {
  add_t(dst, a, b, d);
}
POSEMBED_CLONES void add(double* dst, const double* a, const double* b, int64_t d) {
  add_t(dst, a, b, d);
}
POSEMBED_CLONES void accumulate(float* dst, const float* x, int64_t d) { accumulate_t(dst, x, d); }
POSEMBED_CLONES void accumulate(double* dst, const double* x, int64_t d) {
  accumulate_t(dst, x, d);
}
POSEMBED_CLONES void dropout_add(float* dst, const float* a, const float* b, const uint32_t* u,
                                 uint32_t threshold, float scale, int64_t d) {
  dropout_add_t(dst, a, b, u, threshold, scale, d);
}
POSEMBED_CLONES void dropout_add(double* dst, const double* a, const double* b, const uint32_t* u,
                                 uint32_t threshold, double scale, int64_t d) {
  dropout_add_t(dst, a, b, u, threshold, scale, d);
}

}  // namespace posembed
