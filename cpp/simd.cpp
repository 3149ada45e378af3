#include "simd.hpp"

#include <cstdlib>
#include <cstring>
#include <string>

namespace posembed {

namespace {

struct Choice {
  SimdLevel level;
  std::string error;
};

bool parse_level(const char* text, SimdLevel* level) {
  for (const SimdLevel l : {SimdLevel::baseline, SimdLevel::avx2, SimdLevel::avx512}) {
    if (std::strcmp(text, simd_level_name(l)) == 0) {
      *level = l;
      return true;
    }
  }
  return false;
}

Choice choose() {
  const SimdLevel best = cpu_simd_level();
  const char* env = std::getenv("POSEMBED_SIMD");
  if (env == nullptr || *env == '\0') return {best, ""};
  SimdLevel asked = SimdLevel::baseline;
  if (!parse_level(env, &asked)) {
    return {best, std::string("POSEMBED_SIMD=") + env +
                      " is not a SIMD level; use baseline, avx2 or avx512, or unset it"};
  }
  if (static_cast<int>(asked) > static_cast<int>(best)) {
    return {best, std::string("POSEMBED_SIMD=") + env + " but this CPU (or build) supports " +
                      "at most " + simd_level_name(best) + "; unset it or choose a lower level"};
  }
  return {asked, ""};
}

const Choice& choice() {
  static const Choice c = choose();
  return c;
}

}  // namespace

const char* simd_level_name(SimdLevel level) {
  switch (level) {
    case SimdLevel::avx512: return "avx512";
    case SimdLevel::avx2: return "avx2";
    case SimdLevel::baseline: break;
  }
  return "baseline";
}

SimdLevel cpu_simd_level() {
#if POSEMBED_SIMD_DISPATCH
  // libgcc's checks include the operating system's support (XCR0) for the
  // AVX and AVX-512 register state.
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("f16c") && __builtin_cpu_supports("bmi") &&
                    __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("popcnt");
  if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512cd")) {
    return SimdLevel::avx512;
  }
  if (avx2) return SimdLevel::avx2;
#endif
  return SimdLevel::baseline;
}

SimdLevel simd_level() { return choice().level; }

std::string simd_env_error() { return choice().error; }

}  // namespace posembed
