// Binding of resample_grid: the rows of a table read as an (H, W) grid of a
// vision model's patches, resampled to another grid.
#include "bind.hpp"
#include "resample_grid.hpp"

namespace posembed::bind {
namespace {

using namespace pybind11::literals;

py::array resample_grid(const py::array& table, FloatKind kind, int64_t prefix, int64_t h,
                        int64_t w, int64_t h2, int64_t w2, GridMethod method, Align align) {
  const RowsView rv = float_rows(table, kind);
  if (prefix < 0 || h < 1 || w < 1 || h2 < 1 || w2 < 1 || prefix + h * w != rv.rows ||
      align == Align::scale) {
    throw py::value_error("resample_grid: inconsistent sizes or align");
  }
  py::array out(table.dtype(), Shape{prefix + h2 * w2, table.shape(1)});
  char* dst = static_cast<char*>(out.mutable_data());
  {
    py::gil_scoped_release nogil;
    posembed::resample_grid(rv, kind, prefix, h, w, h2, w2, method, align, dst);
  }
  return out;
}

}  // namespace

void bind_resample_grid(py::module_& m) {
  py::enum_<GridMethod>(m, "GridMethod", "The filter resample_grid resamples with.")
      .value("bilinear", GridMethod::bilinear)
      .value("bicubic", GridMethod::bicubic);
  m.def("resample_grid", &resample_grid, "table"_a, "kind"_a, "prefix"_a, "h"_a, "w"_a, "h2"_a,
        "w2"_a, "method"_a, "align"_a);
}

}  // namespace posembed::bind
