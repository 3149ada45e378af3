// Bindings of the gather family: gather (rows by position) and
// gather_backward (its gradient, rows summed back by position).
#include "bind.hpp"
#include "gather.hpp"
#include "gather_backward.hpp"

namespace posembed::bind {
namespace {

using namespace pybind11::literals;

const char* mode_name(IndexMode m) {
  switch (m) {
    case IndexMode::raise: return "raise";
    case IndexMode::clip: return "clip";
    case IndexMode::wrap: return "wrap";
  }
  return "?";
}

[[noreturn]] void raise_position_error(const py::array& positions, const PositionsView& pv,
                                       int64_t bad, int64_t count, int64_t rows, IndexMode mode) {
  if (rows == 0 && mode != IndexMode::raise) {
    throw py::index_error(std::string("cannot gather in mode '") + mode_name(mode) +
                          "' from a table of 0 rows: there is no row to clip or wrap to");
  }
  std::string msg = "position " + position_to_string(pv, bad);
  if (positions.ndim() > 0) msg += " at " + index_text(positions, "positions", bad);
  msg += " is out of range for a table of " + std::to_string(rows) + " rows";
  msg += rows > 0 ? " (valid positions are 0.." + std::to_string(rows - 1) + ")"
                  : " (it has no valid positions)";
  if (count > 1) {
    msg += "; " + std::to_string(count) + " of " + std::to_string(pv.count) +
           " positions are out of range";
  }
  throw py::index_error(msg);
}

// `fresh` declares that a given out was just allocated by the caller (extend
// fills parts of its new output this way); see use_streaming.
py::array gather(const py::array& table, const py::array& positions, IndexMode mode,
                 const py::object& out_obj, bool fresh) {
  if (table.ndim() != 2) throw py::value_error("table must be 2-D");
  if (!c_contiguous(positions)) throw py::value_error("positions must be C-contiguous");
  if (!positions.dtype().attr("isnative").cast<bool>()) {
    throw py::value_error("positions must be in native byte order");
  }
  const TableView tv{static_cast<const char*>(table.data()),   static_cast<int64_t>(table.shape(0)),
                     static_cast<int64_t>(table.shape(1)),     static_cast<int64_t>(table.strides(0)),
                     static_cast<int64_t>(table.strides(1)),   static_cast<int64_t>(table.itemsize())};
  const PositionsView pv{positions.data(), int_kind(positions),
                         static_cast<int64_t>(positions.size())};
  Shape shape(positions.shape(), positions.shape() + positions.ndim());
  shape.push_back(table.shape(1));
  py::array out = output_array(out_obj, table.dtype(), shape);
  char* dst = static_cast<char*>(out.mutable_data());
  int64_t bad = -1;
  int64_t count = 0;
  {
    py::gil_scoped_release nogil;
    bad = posembed::gather(tv, pv, mode, dst, fresh || out_obj.is_none());
    if (bad >= 0) count = count_invalid_positions(pv, tv.rows);
  }
  if (bad >= 0) raise_position_error(positions, pv, bad, count, tv.rows, mode);
  return out;
}

// grad: (count, cols) C-contiguous of the float kind; positions: int64 in
// [0, length) (checked here before anything is written; clamped by the kernel); out:
// (length, cols) of grad's dtype, zero already unless zero_unused.
void gather_backward(const py::array& grad, FloatKind kind, const I64& positions, int64_t length,
                     py::array& out, bool zero_unused) {
  if (grad.ndim() != 2 || !c_contiguous(grad) || grad.itemsize() != element_size(kind) ||
      grad.shape(0) != positions.size() || length < 0 || out.ndim() != 2 ||
      out.shape(0) != length || out.shape(1) != grad.shape(1) ||
      out.itemsize() != grad.itemsize() || !c_contiguous(out) || !out.writeable()) {
    throw py::value_error("gather_backward: inconsistent arguments");
  }
  const char* src = static_cast<const char*>(grad.data());
  char* dst = static_cast<char*>(out.mutable_data());
  const auto cols = static_cast<int64_t>(grad.shape(1));
  const auto count = static_cast<int64_t>(positions.size());
  bool ok = true;
  {
    py::gil_scoped_release nogil;
    ok = all_in_range(positions.data(), count, length);
    if (ok) {
      posembed::gather_backward(src, cols, positions.data(), count, length, kind, zero_unused,
                                dst);
    }
  }
  if (!ok) raise_out_of_range("positions");
}

}  // namespace

void bind_gather(py::module_& m) {
  py::enum_<IndexMode>(m, "IndexMode", "What gather does with a position outside the table.")
      .value("raise", IndexMode::raise)
      .value("clip", IndexMode::clip)
      .value("wrap", IndexMode::wrap);
  m.def("gather", &gather, "table"_a, "positions"_a, "mode"_a, "out"_a = py::none(),
        "fresh"_a = false);
  m.def("gather_backward", &gather_backward, "grad"_a, "kind"_a, "positions"_a, "length"_a,
        "out"_a, "zero_unused"_a);
}

}  // namespace posembed::bind
