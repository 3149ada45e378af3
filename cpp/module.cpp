// posembed._core._native (re-exported by the package posembed._core): one binding function per kernel family (bind_<family>.cpp).
#include <string>

#include "bind.hpp"
#include "simd.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_native, m) {
  m.doc() = "posembed's compiled kernels; use the functions in the posembed package instead.";
  // A POSEMBED_SIMD that cannot be honoured stops the import: running another
  // level than the one asked for would make a comparison of levels a lie.
  const std::string simd_error = posembed::simd_env_error();
  if (!simd_error.empty()) throw std::runtime_error(simd_error);
  posembed::bind::bind_shared(m);
  posembed::bind::bind_runtime(m);
  posembed::bind::bind_gather(m);
  posembed::bind::bind_interpolate(m);
  posembed::bind::bind_resample_grid(m);
  posembed::bind::bind_embed(m);
  posembed::bind::bind_windows(m);
  posembed::bind::bind_samples(m);
  posembed::bind::bind_blend(m);
  posembed::bind::bind_indexed(m);
  posembed::bind::bind_pack(m);
  posembed::bind::bind_batch_order(m);
  posembed::bind::bind_similarity(m);
  py::module_ probes = m.def_submodule("_probes", "Rooflines and thread-pool probes for the "
                                                  "benchmark and the tests; not part of the API.");
  posembed::bind::bind_probes(probes);
  // Importable by name too (import posembed._core._probes), as a stub package describes it.
  py::module_::import("sys").attr("modules")["posembed._core._probes"] = probes;
}
