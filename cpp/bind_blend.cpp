// Bindings of the blend family: the blending indices of Megatron-LM's
// BlendedDataset (build_blending_indices and build_exhaustive_blending_indices).
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bind.hpp"
#include "blend.hpp"

namespace posembed::bind {
namespace {

using Indices = std::pair<py::array, py::array>;

// The caller's 1-D array, copied while the GIL is held: the kernel reads only
// this copy, so another thread rewriting the array cannot change the draw
// halfway. The Python layer has checked the values and worded the errors;
// these checks keep the kernel safe when they are bypassed.
template <class T>
std::vector<T> private_copy(const py::array_t<T, py::array::c_style>& a, const char* name) {
  if (a.ndim() != 1) throw py::value_error(std::string(name) + ": expected a 1-D array");
  const auto n = static_cast<int64_t>(a.size());
  if (n < 1 || n > kMaxBlendDatasets) {
    throw py::value_error(std::string(name) + ": expected 1 to " +
                          std::to_string(kMaxBlendDatasets) + " datasets");
  }
  return std::vector<T>(a.data(), a.data() + n);
}

Indices outputs(int64_t size) {
  return {py::array_t<int16_t>(static_cast<py::ssize_t>(size)),
          py::array_t<int64_t>(static_cast<py::ssize_t>(size))};
}

Indices blending_indices(const py::array_t<double, py::array::c_style>& weights, int64_t size) {
  const std::vector<double> w = private_copy(weights, "weights");
  for (const double x : w) {
    if (!std::isfinite(x) || x <= 0.0) throw py::value_error("weights: expected finite values > 0");
  }
  if (size < 0) throw py::value_error("size: expected an integer >= 0");
  Indices out = outputs(size);
  {
    const KernelGilRelease nogil(size * 10);
    posembed::blending_indices(w.data(), static_cast<int64_t>(w.size()), size,
                               static_cast<int16_t*>(out.first.mutable_data()),
                               static_cast<int64_t*>(out.second.mutable_data()));
  }
  return out;
}

Indices exhaustive_blending_indices(const py::array_t<int64_t, py::array::c_style>& sizes) {
  const std::vector<int64_t> s = private_copy(sizes, "sizes");
  int64_t total = 0;
  for (const int64_t x : s) {
    if (x < 0) throw py::value_error("sizes: expected values >= 0");
    if (x >= (int64_t{1} << 53) - total) throw py::value_error("sizes: the total reaches 2^53");
    total += x;
  }
  Indices out = outputs(total);
  {
    const KernelGilRelease nogil(total * 10);
    posembed::exhaustive_blending_indices(s.data(), static_cast<int64_t>(s.size()),
                                          static_cast<int16_t*>(out.first.mutable_data()),
                                          static_cast<int64_t*>(out.second.mutable_data()));
  }
  return out;
}

}  // namespace

void bind_blend(py::module_& m) {
  using namespace pybind11::literals;
  m.def("blending_indices", &blending_indices, "weights"_a.noconvert(), "size"_a,
        "Megatron's build_blending_indices: (dataset index int16, sample index int64).");
  m.def("exhaustive_blending_indices", &exhaustive_blending_indices, "sizes"_a.noconvert(),
        "Megatron's build_exhaustive_blending_indices: (dataset index int16, sample index "
        "int64).");
}

}  // namespace posembed::bind
