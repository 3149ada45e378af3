// Bindings of the runtime: thread count and the build's facts (config).
#include "bind.hpp"
#include "random.hpp"
#include "runtime.hpp"
#include "simd.hpp"

#ifndef POSEMBED_SANITIZED
#define POSEMBED_SANITIZED 0  // 1 in a POSEMBED_SANITIZE build (ASan + UBSan)
#endif

namespace posembed::bind {
namespace {

using namespace pybind11::literals;

// Every level this CPU can run, lowest first.
py::list simd_levels() {
  py::list levels;
  const int best = static_cast<int>(cpu_simd_level());
  for (int l = 0; l <= best; ++l) levels.append(simd_level_name(static_cast<SimdLevel>(l)));
  return levels;
}

py::dict config() {
  return py::dict("compiler"_a = POSEMBED_COMPILER, "build_type"_a = POSEMBED_BUILD_TYPE,
                  "sanitized"_a = POSEMBED_SANITIZED != 0, "openmp"_a = openmp_enabled(),
                  "openmp_version"_a = openmp_version(),
                  "simd"_a = simd_level_name(simd_level()),
                  "cpu_simd"_a = simd_level_name(cpu_simd_level()),
                  "simd_levels"_a = simd_levels(), "dropout_rng"_a = random_bits_impl(),
                  "num_threads"_a = get_num_threads(),
                  "default_num_threads"_a = default_num_threads(),
                  "num_threads_set"_a = num_threads_set(), "max_num_threads"_a = max_num_threads(),
                  "forked_child"_a = forked_child(), "parallel_min_bytes"_a = parallel_min_bytes(),
                  "stream_min_bytes"_a = stream_min_bytes());
}

}  // namespace

void bind_runtime(py::module_& m) {
  m.def("set_num_threads", &set_num_threads, "threads"_a);
  m.def("get_num_threads", &get_num_threads);
  m.def("config", &config);
}

}  // namespace posembed::bind
