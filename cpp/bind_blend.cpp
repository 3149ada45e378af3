// Bindings of the blend family: the blending indices of Megatron-LM's
// BlendedDataset (build_blending_indices and build_exhaustive_blending_indices).
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "bind.hpp"
#include "blend.hpp"

namespace posembed::bind {
namespace {

using Indices = py::tuple;

// The caller's 1-D array of T (native order, C-contiguous, aligned), copied
// while the GIL is held: the kernel reads only this copy, so another thread
// rewriting the array cannot change the draw halfway. The Python layer has
// made the array so, checked its values and worded the errors; these checks
// keep the kernel safe when they are bypassed.
template <class T>
std::vector<T> private_copy(const py::array& a, const char* name) {
  if (!py::isinstance<py::array_t<T>>(a) || a.ndim() != 1 || !c_contiguous(a) ||
      a.dtype().byteorder() == '>' ||
      reinterpret_cast<uintptr_t>(a.data()) % alignof(T) != 0) {
    throw py::type_error(std::string(name) + ": expected a 1-D C-contiguous array of " +
                         (sizeof(T) == 8 && std::is_floating_point_v<T> ? "float64" : "int64"));
  }
  const auto n = static_cast<int64_t>(a.size());
  if (n < 1 || n > kMaxBlendDatasets) {
    throw py::value_error(std::string(name) + ": expected 1 to " +
                          std::to_string(kMaxBlendDatasets) + " datasets");
  }
  const T* data = static_cast<const T*>(a.data());
  return std::vector<T>(data, data + n);
}

Indices outputs(int64_t size) {
  return py::make_tuple(py::array_t<int16_t>(static_cast<py::ssize_t>(size)),
                        py::array_t<int64_t>(static_cast<py::ssize_t>(size)));
}

int16_t* first(const Indices& out) {
  return static_cast<int16_t*>(out[0].cast<py::array>().mutable_data());
}
int64_t* second(const Indices& out) {
  return static_cast<int64_t*>(out[1].cast<py::array>().mutable_data());
}

Indices blending_indices(const py::array& weights, int64_t size) {
  const std::vector<double> w = private_copy<double>(weights, "weights");
  for (const double x : w) {
    if (!std::isfinite(x) || x <= 0.0) throw py::value_error("weights: expected finite values > 0");
  }
  if (size < 0) throw py::value_error("size: expected an integer >= 0");
  Indices out = outputs(size);
  int16_t* datasets = first(out);
  int64_t* samples = second(out);
  {
    const KernelGilRelease nogil(size * 10);
    posembed::blending_indices(w.data(), static_cast<int64_t>(w.size()), size, datasets, samples);
  }
  return out;
}

Indices exhaustive_blending_indices(const py::array& sizes) {
  const std::vector<int64_t> s = private_copy<int64_t>(sizes, "sizes");
  int64_t total = 0;
  for (const int64_t x : s) {
    if (x < 0) throw py::value_error("sizes: expected values >= 0");
    if (x >= (int64_t{1} << 53) - total) throw py::value_error("sizes: the total reaches 2^53");
    total += x;
  }
  Indices out = outputs(total);
  int16_t* datasets = first(out);
  int64_t* samples = second(out);
  {
    const KernelGilRelease nogil(total * 10);
    posembed::exhaustive_blending_indices(s.data(), static_cast<int64_t>(s.size()), datasets,
                                          samples);
  }
  return out;
}

}  // namespace

void bind_blend(py::module_& m) {
  using namespace pybind11::literals;
  m.def("blending_indices", &blending_indices, "weights"_a, "size"_a,
        "Megatron's build_blending_indices: (dataset index int16, sample index int64).");
  m.def("exhaustive_blending_indices", &exhaustive_blending_indices, "sizes"_a,
        "Megatron's build_exhaustive_blending_indices: (dataset index int16, sample index "
        "int64).");
}

}  // namespace posembed::bind
