// Bindings of the gather family: gather (rows by position) and
// gather_backward (its gradient, rows summed back by position).
#include <cstring>
#include <string>
#include <utility>
#include <vector>

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

// out_just_allocated: the caller allocated out for this call (extend fills
// parts of its new output this way), so the kernel writes it as it would a
// result of its own, with plain stores (see use_streaming).
py::array gather(const py::array& table, const py::array& positions, IndexMode mode,
                 const py::object& out_obj, bool out_just_allocated) {
  member(mode, IndexMode::wrap);
  if (table.ndim() != 2) throw py::value_error("table must be 2-D");
  const TableView tv{static_cast<const char*>(table.data()),   static_cast<int64_t>(table.shape(0)),
                     static_cast<int64_t>(table.shape(1)),     static_cast<int64_t>(table.strides(0)),
                     static_cast<int64_t>(table.strides(1)),   static_cast<int64_t>(table.itemsize())};
  const PositionsView pv = positions_view(positions, "positions");
  Shape shape(positions.shape(), positions.shape() + positions.ndim());
  shape.push_back(table.shape(1));
  py::array out = output_array(out_obj, table.dtype(), shape);
  char* dst = static_cast<char*>(out.mutable_data());
  OutOfRange bad{-1, 0};
  {
    const KernelGilRelease nogil(static_cast<int64_t>(out.nbytes()));
    bad = posembed::gather(tv, pv, mode, dst, out_just_allocated || out_obj.is_none());
  }
  if (bad.found()) {
    if (tv.rows == 0 && mode != IndexMode::raise) {
      throw py::index_error(std::string("cannot gather in mode '") + mode_name(mode) +
                            "' from a table of 0 rows: there is no row to clip or wrap to");
    }
    raise_out_of_range(positions, {"positions", "position", ""}, tv.rows, bad);
  }
  return out;
}

// gather's common call, table[positions] in mode "raise", into a new array or
// into out: None unless the table is a 2-D ndarray of plain numbers (any
// strides), the positions a plain integer ndarray (or, without out, a Python
// int) in 0..rows-1, and out, when given, a plain writeable ndarray of the
// table's dtype and the result's shape whose memory neither the table nor
// the positions reach (the Python layer then checks in full, and reports).
py::object gather_plain(const py::object& table, const py::object& positions,
                        const py::object& out) {
  if (!exact_ndarray(table)) return py::none();
  const auto t = py::reinterpret_borrow<py::array>(table);
  const char table_kind = t.dtype().kind();  // plain numbers: no objects inside
  const bool numeric = table_kind == 'f' || table_kind == 'i' || table_kind == 'u' ||
                       table_kind == 'b' || table_kind == 'c';
  if (t.ndim() != 2 || !numeric) return py::none();
  if (!out.is_none()) {
    if (!plain(positions) || !plain(out)) return py::none();
    const auto p = py::reinterpret_borrow<py::array>(positions);
    const auto o = py::reinterpret_borrow<py::array>(out);
    const char kind = p.dtype().kind();
    if ((kind != 'i' && kind != 'u') || !o.writeable() || !c_contiguous(t) ||
        !py::detail::npy_api::get().PyArray_EquivTypes_(o.dtype().ptr(), t.dtype().ptr()) ||
        o.ndim() != p.ndim() + 1 || o.shape(p.ndim()) != t.shape(1)) {
      return py::none();
    }
    for (py::ssize_t k = 0; k < p.ndim(); ++k) {
      if (o.shape(k) != p.shape(k)) return py::none();
    }
    // all three contiguous: each one's memory is its bytes from its start
    const auto bytes_of = [](const py::array& a) {
      const auto* at = static_cast<const char*>(a.data());
      return std::pair<const char*, const char*>(at, at + a.nbytes());
    };
    const auto [o0, o1] = bytes_of(o);
    for (const py::array* input : {&t, &p}) {
      const auto [i0, i1] = bytes_of(*input);
      if (o0 < i1 && i0 < o1) return py::none();
    }
    return gather(t, p, IndexMode::raise, out, false);
  }
  if (PyLong_CheckExact(positions.ptr())) {  // one row, by a Python int (no bool)
    int overflow = 0;
    const long long at = PyLong_AsLongLongAndOverflow(positions.ptr(), &overflow);
    if (overflow != 0 || at < 0 || at >= t.shape(0)) return py::none();  // reported in full
    const auto cols = t.shape(1), item = t.itemsize();
    py::array row(t.dtype(), std::vector<py::ssize_t>{cols});
    const char* src = static_cast<const char*>(t.data()) + at * t.strides(0);
    char* dst = static_cast<char*>(row.mutable_data());
    if (t.strides(1) == item) {
      std::memcpy(dst, src, static_cast<size_t>(cols * item));
    } else {
      for (py::ssize_t c = 0; c < cols; ++c) {
        std::memcpy(dst + c * item, src + c * t.strides(1), static_cast<size_t>(item));
      }
    }
    return std::move(row);
  }
  if (!plain(positions)) return py::none();
  const auto p = py::reinterpret_borrow<py::array>(positions);
  const char kind = p.dtype().kind();
  if (kind != 'i' && kind != 'u') return py::none();
  return gather(t, p, IndexMode::raise, py::none(), false);
}

// grad: (count, cols) C-contiguous of the float kind; positions: count
// integers, any shape, in [0, length) (checked here before anything is
// written). Without out, the result starts as zero pages and the kernel
// writes only the rows some position names; a given out is overwritten whole.
py::array gather_backward(const py::array& grad, FloatKind kind, const py::array& positions,
                          int64_t length, const py::object& out_obj) {
  member(kind, FloatKind::f64);
  if (grad.ndim() != 2 || !c_contiguous(grad) || grad.itemsize() != element_size(kind) ||
      grad.shape(0) != positions.size() || length < 0) {
    throw py::value_error("gather_backward: inconsistent arguments");
  }
  const PositionsView pv = positions_view(positions, "positions");
  const auto cols = static_cast<int64_t>(grad.shape(1));
  py::array out = output_array(out_obj, grad.dtype(), {length, cols}, Fill::zeros);
  const bool zero_unused = !out_obj.is_none();
  const char* src = static_cast<const char*>(grad.data());
  char* dst = static_cast<char*>(out.mutable_data());
  OutOfRange bad{-1, 0};
  {
    const KernelGilRelease nogil(static_cast<int64_t>(grad.nbytes() + out.nbytes()));
    bad = find_out_of_range(pv, length);
    if (!bad.found() && length > 0 && cols > 0) {
      std::vector<int64_t> storage;
      const int64_t* rows = int64_positions(pv, storage);
      posembed::gather_backward(src, cols, rows, pv.count, length, kind, zero_unused, dst);
    }
  }
  if (bad.found()) {
    raise_out_of_range(positions, {"positions", "position", "length " + std::to_string(length)},
                       length, bad);
  }
  return out;
}

}  // namespace

void bind_gather(py::module_& m) {
  py::enum_<IndexMode>(m, "IndexMode", "What gather does with a position outside the table.")
      .value("raise", IndexMode::raise)
      .value("clip", IndexMode::clip)
      .value("wrap", IndexMode::wrap);
  m.def("gather", &gather, "table"_a, "positions"_a, "mode"_a, "out"_a = py::none(),
        "out_just_allocated"_a = false);
  m.def("gather_plain", &gather_plain, "table"_a, "positions"_a, "out"_a = py::none());
  m.def("gather_backward", &gather_backward, "grad"_a, "kind"_a, "positions"_a, "length"_a,
        "out"_a = py::none());
}

}  // namespace posembed::bind
