// Bindings of similarity's row scaling and triangle mirror (the Gram
// product between them is NumPy's).
#include <vector>

#include "bind.hpp"
#include "runtime.hpp"
#include "similarity.hpp"

namespace posembed::bind {
namespace {

using namespace pybind11::literals;

template <class T>
bool is(const py::array& a) {
  return py::isinstance<py::array_t<T>>(a);
}

// (rows, d) float32 or float64, C-contiguous: a new array of its rows at unit length.
py::array unit_rows(const py::array& x) {
  if (x.ndim() != 2 || !c_contiguous(x) || !(is<float>(x) || is<double>(x))) {
    throw py::value_error("unit_rows: x must be a 2-D C-contiguous float32 or float64 array");
  }
  const auto rows = static_cast<int64_t>(x.shape(0)), cols = static_cast<int64_t>(x.shape(1));
  py::array out(x.dtype(), {rows, cols});
  // the caller's rows may change while the GIL is released: each row is read
  // for its peak, then again for its values; a row changed between the two
  // reads gives a row of other values, never a read outside the array
  if (is<float>(x)) {
    const auto* src = static_cast<const float*>(x.data());
    auto* dst = static_cast<float*>(out.mutable_data());
    py::gil_scoped_release nogil;
    posembed::unit_rows(src, rows, cols, dst);
  } else {
    const auto* src = static_cast<const double*>(x.data());
    auto* dst = static_cast<double*>(out.mutable_data());
    py::gil_scoped_release nogil;
    posembed::unit_rows(src, rows, cols, dst);
  }
  return out;
}

// (rows, d) float32 or float64, C-contiguous: (each row's largest magnitude,
// the length of the row divided by it), on `threads` threads (0: as many as
// the work takes).
py::tuple row_scales(const py::array& x, int threads) {
  if (threads < 0) throw py::value_error("row_scales: threads must be >= 0");
  if (x.ndim() != 2 || !c_contiguous(x) || !(is<float>(x) || is<double>(x))) {
    throw py::value_error("row_scales: x must be a 2-D C-contiguous float32 or float64 array");
  }
  const auto rows = static_cast<int64_t>(x.shape(0)), cols = static_cast<int64_t>(x.shape(1));
  const std::vector<py::ssize_t> shape{static_cast<py::ssize_t>(rows)};
  py::array peak(x.dtype(), shape), norm(x.dtype(), shape);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const auto* src = static_cast<const T*>(x.data());
    auto* p = static_cast<T*>(peak.mutable_data());
    auto* n = static_cast<T*>(norm.mutable_data());
    const int64_t bytes = rows * cols * static_cast<int64_t>(sizeof(T));
    const int team = threads > 0 ? threads : threads_for_bytes(bytes);
    py::gil_scoped_release nogil;
    posembed::row_scales(src, rows, cols, p, n, team);
  };
  if (is<float>(x)) {
    run(float{});
  } else {
    run(double{});
  }
  return py::make_tuple(peak, norm);
}

// a (n, n) float32 or float64, C-contiguous, writeable: the lower triangle
// of its rows [begin, end) (end -1: n) scaled by inv[i] * inv[j] (inv None:
// not scaled) and mirrored onto the upper one, in place, on `threads`
// threads (0: as many as the work takes).
void mirror_lower(py::array& a, const py::object& inv_obj, int64_t begin, int64_t end,
                  int threads) {
  if (a.ndim() != 2 || a.shape(0) != a.shape(1) || !c_contiguous(a) || !a.writeable() ||
      !(is<float>(a) || is<double>(a))) {
    throw py::value_error("mirror_lower: a must be a square C-contiguous writeable float array");
  }
  const auto n = static_cast<int64_t>(a.shape(0));
  if (end == -1) end = n;
  if (begin < 0 || end < begin || end > n || threads < 0) {
    throw py::value_error("mirror_lower: rows [begin, end) must lie in [0, n), threads >= 0");
  }
  const bool scaled = !inv_obj.is_none();
  py::array inv;
  if (scaled) {
    inv = py::array::ensure(inv_obj);
    if (!inv || inv.ndim() != 1 || inv.shape(0) != a.shape(0) || !c_contiguous(inv) ||
        !inv.dtype().is(a.dtype())) {
      throw py::value_error("mirror_lower: inv must be 1-D, of a's rows and dtype");
    }
  }
  auto run = [&](auto tag) {
    using T = decltype(tag);
    auto* p = static_cast<T*>(a.mutable_data());
    // the scales are copied: the caller's array may change while the GIL is released
    std::vector<T> scales;
    if (scaled) {
      const auto* q = static_cast<const T*>(inv.data());
      scales.assign(q, q + n);
    }
    const T* s = scaled ? scales.data() : nullptr;
    const int64_t bytes = (end - begin) * n * static_cast<int64_t>(sizeof(T));
    const int team = threads > 0 ? threads : threads_for_bytes(bytes);
    py::gil_scoped_release nogil;
    posembed::mirror_lower(p, n, s, begin, end, team);
  };
  if (is<float>(a)) {
    run(float{});
  } else {
    run(double{});
  }
}

}  // namespace

void bind_similarity(py::module_& m) {
  m.def("unit_rows", &unit_rows, "x"_a);
  m.def("row_scales", &row_scales, "x"_a, "threads"_a = 0);
  m.def("mirror_lower", &mirror_lower, "a"_a, "inv"_a = py::none(), "begin"_a = 0, "end"_a = -1,
        "threads"_a = 0);
}

}  // namespace posembed::bind
