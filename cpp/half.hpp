// float16 and bfloat16 storage: conversions to and from float32 that round
// to nearest even, bit-compatible with NumPy's float16 and ml_dtypes'
// bfloat16 for every finite value, infinity and signed zero (NaNs stay NaN).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace posembed {

struct f16 {
  uint16_t bits;
};
struct bf16 {
  uint16_t bits;
};

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline float to_float(f16 h) {
  const uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  const uint32_t exp = (h.bits >> 10) & 0x1fu;
  const uint32_t mant = h.bits & 0x3ffu;
  if (exp == 0) {
    // zero or subnormal: mant * 2^-24, exact in float
    const float mag = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return bits_float(float_bits(mag) | sign);
  }
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (mant << 13));  // inf, NaN
  return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

inline f16 to_f16(float f) {
  const uint32_t x = float_bits(f);
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) {  // inf or NaN; a NaN keeps its top payload bits and stays a NaN
    if (a == 0x7f800000u) return f16{static_cast<uint16_t>(sign | 0x7c00u)};
    const auto payload = static_cast<uint16_t>((a >> 13) & 0x3ffu);
    return f16{static_cast<uint16_t>(sign | 0x7c00u | (payload ? payload : 1u))};
  }
  // 65520 is halfway between the largest half (65504) and 2^16: ties go to
  // the even neighbour, which is infinity.
  if (a >= 0x477ff000u) return f16{static_cast<uint16_t>(sign | 0x7c00u)};
  if (a < 0x38800000u) {
    // below 2^-14: a subnormal half, in units of 2^-24; scaling by 2^24 is
    // exact, and nearbyint rounds half to even in the default mode.
    const float units = std::nearbyint(bits_float(a) * 16777216.0f);
    return f16{static_cast<uint16_t>(sign | static_cast<uint16_t>(units))};
  }
  // normal: round the 13 dropped mantissa bits to nearest even, then rebias
  // the exponent (127 - 15 = 112); a carry out of the mantissa bumps it.
  const uint32_t rounded = a + 0xfffu + ((a >> 13) & 1u);
  return f16{static_cast<uint16_t>(sign | ((rounded - (112u << 23)) >> 13))};
}

inline float to_float(bf16 h) { return bits_float(static_cast<uint32_t>(h.bits) << 16); }

inline bf16 to_bf16(float f) {
  const uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    return bf16{static_cast<uint16_t>(((x >> 16) & 0x8000u) | 0x7fc0u)};  // quiet NaN
  }
  const uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);
  return bf16{static_cast<uint16_t>(rounded >> 16)};
}

// Storage type S computed in type C: load and store with rounding.
template <class S>
struct Compute {
  using type = S;
  static S load(S v) { return v; }
  static S store(S v) { return v; }
};
template <>
struct Compute<f16> {
  using type = float;
  static float load(f16 v) { return to_float(v); }
  static f16 store(float v) { return to_f16(v); }
};
template <>
struct Compute<bf16> {
  using type = float;
  static float load(bf16 v) { return to_float(v); }
  static bf16 store(float v) { return to_bf16(v); }
};

// Element types of the float kernels, as the bindings name them.
enum class FloatKind : int { f16 = 0, bf16 = 1, f32 = 2, f64 = 3 };

// Bytes of one element of `kind`.
inline int64_t element_size(FloatKind kind) {
  return kind == FloatKind::f64 ? 8 : kind == FloatKind::f32 ? 4 : 2;
}

// Calls f(S{}) with the storage type behind `kind`.
template <class F>
auto with_float_kind(FloatKind kind, F&& f) {
  switch (kind) {
    case FloatKind::f16: return f(f16{});
    case FloatKind::bf16: return f(bf16{});
    case FloatKind::f32: return f(float{});
    case FloatKind::f64: break;
  }
  return f(double{});
}

}  // namespace posembed
