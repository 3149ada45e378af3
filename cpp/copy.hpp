// Byte movers shared by the kernels: an ordinary copy for outputs that should
// stay in cache, and a streaming copy for outputs larger than the cache.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace posembed {

inline void copy_plain(char* dst, const char* src, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n));
}

// Copies n bytes with non-temporal stores for every whole 64-byte line of
// dst; the partial lines at either end use ordinary stores so that no cache
// line is written half by each kind. Call stream_fence() before the data is
// handed to another thread.
inline void copy_stream(char* dst, const char* src, int64_t n) {
#if defined(__SSE2__)
  if (n < 128) {
    copy_plain(dst, src, n);
    return;
  }
  const auto misalign = static_cast<int64_t>(reinterpret_cast<uintptr_t>(dst) & 63u);
  const int64_t head = misalign ? 64 - misalign : 0;
  copy_plain(dst, src, head);
  dst += head;
  src += head;
  n -= head;
  const int64_t body = n & ~int64_t{63};
  for (int64_t k = 0; k < body; k += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + k));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + k + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + k + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + k + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + k), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + k + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + k + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + k + 48), d);
  }
  copy_plain(dst + body, src + body, n - body);
#else
  copy_plain(dst, src, n);
#endif
}

// Fills n bytes with `value` using streaming stores (partial lines plain).
inline void fill_stream(char* dst, unsigned char value, int64_t n) {
#if defined(__SSE2__)
  if (n < 128) {
    std::memset(dst, value, static_cast<size_t>(n));
    return;
  }
  const auto misalign = static_cast<int64_t>(reinterpret_cast<uintptr_t>(dst) & 63u);
  const int64_t head = misalign ? 64 - misalign : 0;
  std::memset(dst, value, static_cast<size_t>(head));
  dst += head;
  n -= head;
  const int64_t body = n & ~int64_t{63};
  const __m128i v = _mm_set1_epi8(static_cast<char>(value));
  for (int64_t k = 0; k < body; k += 64) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + k), v);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + k + 16), v);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + k + 32), v);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + k + 48), v);
  }
  std::memset(dst + body, value, static_cast<size_t>(n - body));
#else
  std::memset(dst, value, static_cast<size_t>(n));
#endif
}

// Orders this thread's streaming stores before anything it does next.
inline void stream_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

}  // namespace posembed
