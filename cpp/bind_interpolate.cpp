// Bindings of the interpolation family: interpolate (a table stretched or
// shrunk to a new row count) and lerp (rows at fractional positions).
#include "bind.hpp"
#include "interpolate.hpp"
#include "resample_grid.hpp"

namespace posembed::bind {
namespace {

using namespace pybind11::literals;

// out_just_allocated: the caller allocated out for this call (extend fills
// the new rows of its output this way), so the kernel writes it as it would a
// result of its own, with plain stores (see use_streaming).
// antialias: the antialiased bilinear filter (half_pixel, every row: first 0).
py::array interpolate(const py::array& table, FloatKind kind, int64_t length, Align align,
                      int64_t first, const py::object& out_obj, bool out_just_allocated,
                      bool antialias) {
  member(align, Align::corners);
  const RowsView rv = float_rows(table, kind);
  if (rv.rows < 1 || length < 1 || first < 0 || first > length) {
    throw py::value_error("interpolate needs a non-empty table and 0 <= first <= length");
  }
  if (antialias && (align != Align::half_pixel || first != 0)) {
    throw py::value_error("interpolate: antialias needs align half_pixel and first 0");
  }
  py::array out = output_array(out_obj, table.dtype(), {length - first, table.shape(1)});
  char* dst = static_cast<char*>(out.mutable_data());
  {
    py::gil_scoped_release nogil;
    if (antialias) {
      posembed::interpolate_antialias(rv, kind, length, dst);
    } else {
      posembed::interpolate(rv, kind, length, align, first, dst,
                            out_just_allocated || out_obj.is_none());
    }
  }
  return out;
}

py::array lerp(const py::array& table, FloatKind kind, const py::array& positions,
               const py::object& out_obj) {
  const RowsView rv = float_rows(table, kind);
  if (!c_contiguous(positions) || positions.dtype().kind() != 'f' || positions.itemsize() != 8 ||
      !positions.dtype().attr("isnative").cast<bool>()) {
    throw py::value_error("positions must be a C-contiguous native float64 array");
  }
  const auto* pos = static_cast<const double*>(positions.data());
  const auto count = static_cast<int64_t>(positions.size());
  Shape shape(positions.shape(), positions.shape() + positions.ndim());
  shape.push_back(table.shape(1));
  py::array out = output_array(out_obj, table.dtype(), shape);
  char* dst = static_cast<char*>(out.mutable_data());
  int64_t bad = -1;
  {
    py::gil_scoped_release nogil;
    bad = first_invalid_fraction(pos, count, rv.rows);
    if (bad < 0) posembed::lerp(rv, kind, pos, count, dst, out_obj.is_none());
  }
  if (bad >= 0) {
    std::string msg = "position " + py::repr(py::float_(pos[bad])).cast<std::string>();
    if (positions.ndim() > 0) msg += " at " + index_text(positions, "positions", bad);
    msg += rv.rows > 0 ? " is not a finite number in [0, " + std::to_string(rv.rows - 1) +
                             "] (the table has " + std::to_string(rv.rows) + " rows)"
                       : " cannot be looked up: the table has no rows";
    throw py::value_error(msg);
  }
  return out;
}

}  // namespace

void bind_interpolate(py::module_& m) {
  m.def("interpolate", &interpolate, "table"_a, "kind"_a, "length"_a, "align"_a, "first"_a = 0,
        "out"_a = py::none(), "out_just_allocated"_a = false, "antialias"_a = false);
  m.def("lerp", &lerp, "table"_a, "kind"_a, "positions"_a, "out"_a = py::none());
}

}  // namespace posembed::bind
