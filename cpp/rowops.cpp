#include "rowops.hpp"

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

}  // namespace

POSEMBED_CLONES void blend(float* dst, const float* a, const float* b, float wa, float wb,
                           int64_t d) {
  blend_t(dst, a, b, wa, wb, d);
}
POSEMBED_CLONES void blend(double* dst, const double* a, const double* b, double wa, double wb,
                           int64_t d) {
  blend_t(dst, a, b, wa, wb, d);
}
POSEMBED_CLONES void scale(float* dst, const float* x, float w, int64_t d) { scale_t(dst, x, w, d); }
POSEMBED_CLONES void scale(double* dst, const double* x, double w, int64_t d) {
  scale_t(dst, x, w, d);
}
POSEMBED_CLONES void axpy(float* dst, const float* x, float w, int64_t d) { axpy_t(dst, x, w, d); }
POSEMBED_CLONES void axpy(double* dst, const double* x, double w, int64_t d) {
  axpy_t(dst, x, w, d);
}

}  // namespace posembed
