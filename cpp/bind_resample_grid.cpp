// Binding of resample_grid: the rows of a table read as an (H, W) grid of a
// vision model's patches, resampled to another grid.
#include "bind.hpp"
#include "resample_grid.hpp"

namespace posembed::bind {
namespace {

using namespace pybind11::literals;

py::array resample_grid(const py::array& table, FloatKind kind, int64_t prefix, int64_t height,
                        int64_t width, int64_t new_height, int64_t new_width, GridMethod method,
                        Align align, bool antialias) {
  member(method, GridMethod::bicubic);
  member(align, Align::corners);
  const RowsView rv = float_rows(table, kind);
  if (prefix < 0 || height < 1 || width < 1 || new_height < 1 || new_width < 1 ||
      prefix + height * width != rv.rows || align == Align::scale ||
      (antialias && align != Align::half_pixel)) {
    throw py::value_error("resample_grid: inconsistent sizes or align");
  }
  py::array out(table.dtype(), Shape{prefix + new_height * new_width, table.shape(1)});
  char* dst = static_cast<char*>(out.mutable_data());
  {
    py::gil_scoped_release nogil;
    posembed::resample_grid(rv, kind, prefix, height, width, new_height, new_width, method, align,
                            antialias, dst);
  }
  return out;
}

}  // namespace

void bind_resample_grid(py::module_& m) {
  py::enum_<GridMethod>(m, "GridMethod", "The filter resample_grid resamples with.")
      .value("bilinear", GridMethod::bilinear)
      .value("bicubic", GridMethod::bicubic);
  m.def("resample_grid", &resample_grid, "table"_a, "kind"_a, "prefix"_a, "height"_a, "width"_a,
        "new_height"_a, "new_width"_a, "method"_a, "align"_a, "antialias"_a = false);
  m.def("resample_grid_flops", &posembed::resample_grid_flops, "height"_a, "width"_a,
        "new_height"_a, "new_width"_a, "d"_a, "method"_a, "align"_a, "antialias"_a = false,
        "The float multiplies and adds resample_grid does for these sizes.");
}

}  // namespace posembed::bind
