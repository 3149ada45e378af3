// Run-time SIMD dispatch. The arithmetic of every float kernel (the row
// operations in rowops.simd.inc) is compiled three times from one source:
// for the x86-64 baseline (SSE2), for AVX2 with FMA, F16C, BMI1/2 and POPCNT
// and for AVX-512 (F, BW, VL, DQ, CD; 512-bit vectors preferred). Each target
// names exactly the features cpu_simd_level() checks. The
// build never targets the build machine; the level is chosen once, when the
// module loads: the best the CPU offers, or the one POSEMBED_SIMD names.
//
// Every level gives the same bits: the kernels are compiled with
// -ffp-contract=off (FMA is allowed as an instruction set but never fused
// into a*b + c), and no loop reorders a sum.
#pragma once

#include <string>

namespace posembed {

enum class SimdLevel : int { baseline = 0, avx2 = 1, avx512 = 2 };

const char* simd_level_name(SimdLevel level);
// Best level this CPU (and this build) supports.
SimdLevel cpu_simd_level();
// Level the kernels use: POSEMBED_SIMD when it names a supported level, else
// cpu_simd_level(). Read once.
SimdLevel simd_level();
// Why POSEMBED_SIMD cannot be honoured ("" when it can, or is unset); the
// module refuses to import when this is not empty.
std::string simd_env_error();

}  // namespace posembed

// Brackets for the per-level copies of a source. GCC applies the target to
// every function defined in between, lambdas included; code from headers
// included before the bracket (the standard library, half.hpp) keeps the
// baseline target and is inlined into the wider code, so no shared inline
// function is ever emitted with instructions the baseline lacks. Each copy
// lives in its own namespace (simd_baseline, simd_avx2, simd_avx512).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define POSEMBED_SIMD_DISPATCH 1
#define POSEMBED_TARGET_AVX2 \
  _Pragma("GCC push_options") _Pragma("GCC target(\"avx2,fma,f16c,bmi,bmi2,popcnt\")")
// (one string: _Pragma does not join literals)
#define POSEMBED_TARGET_AVX512 \
  _Pragma("GCC push_options") _Pragma("GCC target(\"avx2,fma,f16c,bmi,bmi2,popcnt,avx512f,avx512bw,avx512vl,avx512dq,avx512cd,prefer-vector-width=512\")")
#define POSEMBED_TARGET_END _Pragma("GCC pop_options")
#else
// Other compilers and architectures: all three copies are the baseline
// build, and cpu_simd_level() reports baseline.
#define POSEMBED_SIMD_DISPATCH 0
#define POSEMBED_TARGET_AVX2
#define POSEMBED_TARGET_AVX512
#define POSEMBED_TARGET_END
#endif
