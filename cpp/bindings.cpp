// The only file that sees Python: converts arrays to views, checks what
// memory safety needs (the Python layer has already checked the rest and
// written the friendly messages), releases the GIL around each kernel and
// turns kernel results into Python exceptions.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "embed.hpp"
#include "gather.hpp"
#include "gather_backward.hpp"
#include "interpolate.hpp"
#include "parallel.hpp"
#include "resample_grid.hpp"
#include "roofline.hpp"
#include "runtime.hpp"
#include "simd.hpp"
#include "windows.hpp"

namespace py = pybind11;
using namespace pybind11::literals;

namespace {

posembed::IntKind int_kind(const py::array& a) {
  const py::dtype dt = a.dtype();
  const char kind = dt.kind();
  const auto size = dt.itemsize();
  if (kind == 'i' || kind == 'u') {
    const bool s = kind == 'i';
    switch (size) {
      case 1: return s ? posembed::IntKind::i8 : posembed::IntKind::u8;
      case 2: return s ? posembed::IntKind::i16 : posembed::IntKind::u16;
      case 4: return s ? posembed::IntKind::i32 : posembed::IntKind::u32;
      case 8: return s ? posembed::IntKind::i64 : posembed::IntKind::u64;
      default: break;
    }
  }
  throw py::type_error("positions must have an integer dtype (int8..int64, uint8..uint64); got " +
                       py::str(dt).cast<std::string>());
}

bool c_contiguous(const py::array& a) {
  return (a.flags() & py::array::c_style) != 0;
}

// "positions[1, 3]" for the flat C-order index `flat` of `a`.
std::string index_text(const py::array& a, int64_t flat) {
  const auto nd = a.ndim();
  std::vector<int64_t> idx(static_cast<size_t>(nd));
  for (auto k = nd; k-- > 0;) {
    const auto extent = static_cast<int64_t>(a.shape(k));
    idx[static_cast<size_t>(k)] = flat % extent;
    flat /= extent;
  }
  std::string s = "positions[";
  for (size_t k = 0; k < idx.size(); ++k) {
    if (k) s += ", ";
    s += std::to_string(idx[k]);
  }
  return s + "]";
}

const char* mode_name(posembed::IndexMode m) {
  switch (m) {
    case posembed::IndexMode::raise: return "raise";
    case posembed::IndexMode::clip: return "clip";
    case posembed::IndexMode::wrap: return "wrap";
  }
  return "?";
}

[[noreturn]] void raise_position_error(const py::array& positions, const posembed::PositionsView& pv,
                                       int64_t bad, int64_t count, int64_t rows,
                                       posembed::IndexMode mode) {
  if (rows == 0 && mode != posembed::IndexMode::raise) {
    throw py::index_error(std::string("cannot gather in mode '") + mode_name(mode) +
                          "' from a table of 0 rows: there is no row to clip or wrap to");
  }
  std::string msg = "position " + posembed::position_to_string(pv, bad);
  if (positions.ndim() > 0) msg += " at " + index_text(positions, bad);
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
py::array gather(const py::array& table, const py::array& positions, int mode_code,
                 const py::object& out_obj, bool fresh) {
  if (table.ndim() != 2) throw py::value_error("table must be 2-D");
  if (mode_code < 0 || mode_code > 2) throw py::value_error("mode code must be 0, 1 or 2");
  if (!c_contiguous(positions)) throw py::value_error("positions must be C-contiguous");
  if (!positions.dtype().attr("isnative").cast<bool>()) {
    throw py::value_error("positions must be in native byte order");
  }
  const auto mode = static_cast<posembed::IndexMode>(mode_code);
  const posembed::TableView tv{static_cast<const char*>(table.data()),
                               static_cast<int64_t>(table.shape(0)),
                               static_cast<int64_t>(table.shape(1)),
                               static_cast<int64_t>(table.strides(0)),
                               static_cast<int64_t>(table.strides(1)),
                               static_cast<int64_t>(table.itemsize())};
  const posembed::PositionsView pv{positions.data(), int_kind(positions),
                                   static_cast<int64_t>(positions.size())};

  std::vector<py::ssize_t> shape(positions.shape(), positions.shape() + positions.ndim());
  shape.push_back(table.shape(1));
  py::array out;
  if (out_obj.is_none()) {
    out = py::array(table.dtype(), shape);
  } else {
    if (!py::isinstance<py::array>(out_obj)) throw py::type_error("out must be a numpy.ndarray");
    out = py::reinterpret_borrow<py::array>(out_obj);
    const bool same_shape = std::vector<py::ssize_t>(out.shape(), out.shape() + out.ndim()) == shape;
    if (!same_shape || out.itemsize() != table.itemsize() || !c_contiguous(out) || !out.writeable()) {
      throw py::value_error("out must be a writeable C-contiguous array of the result's shape");
    }
  }
  char* dst = static_cast<char*>(out.mutable_data());
  int64_t bad = -1;
  int64_t count = 0;
  {
    py::gil_scoped_release nogil;
    bad = posembed::gather(tv, pv, mode, dst, fresh || out_obj.is_none());
    if (bad >= 0) count = posembed::count_invalid_positions(pv, tv.rows);
  }
  if (bad >= 0) raise_position_error(positions, pv, bad, count, tv.rows, mode);
  return out;
}

// The float kernels read rows through a row stride; columns must be adjacent
// and the element type one of FloatKind (the Python layer ensures both).
posembed::RowsView float_rows(const py::array& t, int kind_code) {
  if (t.ndim() != 2) throw py::value_error("table must be 2-D");
  if (kind_code < 0 || kind_code > 3) throw py::value_error("unknown float kind");
  static constexpr int64_t sizes[] = {2, 2, 4, 8};
  const bool strided = t.shape(0) > 0 && t.shape(1) > 1 && t.strides(1) != t.itemsize();
  if (t.itemsize() != sizes[kind_code] || strided) {
    throw py::value_error("table rows must be contiguous and match the float kind");
  }
  return {static_cast<const char*>(t.data()), static_cast<int64_t>(t.shape(0)),
          static_cast<int64_t>(t.shape(1)), static_cast<int64_t>(t.strides(0))};
}

posembed::Align align_of(int code) {
  if (code < 0 || code > 2) throw py::value_error("unknown align code");
  return static_cast<posembed::Align>(code);
}

// `out` if given (checked by the Python layer; here only what memory safety
// needs), else a new array of `shape` and the table's dtype.
py::array output_for(const py::array& table, const std::vector<py::ssize_t>& shape,
                     const py::object& out_obj) {
  if (out_obj.is_none()) return py::array(table.dtype(), shape);
  if (!py::isinstance<py::array>(out_obj)) throw py::type_error("out must be a numpy.ndarray");
  auto out = py::reinterpret_borrow<py::array>(out_obj);
  if (std::vector<py::ssize_t>(out.shape(), out.shape() + out.ndim()) != shape ||
      out.itemsize() != table.itemsize() || !c_contiguous(out) || !out.writeable()) {
    throw py::value_error("out must be a writeable C-contiguous array of the result's shape");
  }
  return out;
}

py::array interpolate(const py::array& table, int kind, int64_t length, int align, int64_t first,
                      const py::object& out_obj, bool fresh) {
  const posembed::RowsView rv = float_rows(table, kind);
  if (rv.rows < 1 || length < 1 || first < 0 || first > length) {
    throw py::value_error("interpolate needs a non-empty table and 0 <= first <= length");
  }
  py::array out = output_for(table, {length - first, table.shape(1)}, out_obj);
  char* dst = static_cast<char*>(out.mutable_data());
  {
    py::gil_scoped_release nogil;
    posembed::interpolate(rv, static_cast<posembed::FloatKind>(kind), length, align_of(align),
                          first, dst, fresh || out_obj.is_none());
  }
  return out;
}

py::array lerp(const py::array& table, int kind, const py::array& positions,
               const py::object& out_obj) {
  const posembed::RowsView rv = float_rows(table, kind);
  if (!c_contiguous(positions) || positions.dtype().kind() != 'f' || positions.itemsize() != 8 ||
      !positions.dtype().attr("isnative").cast<bool>()) {
    throw py::value_error("positions must be a C-contiguous native float64 array");
  }
  const auto* pos = static_cast<const double*>(positions.data());
  const auto n = static_cast<int64_t>(positions.size());
  std::vector<py::ssize_t> shape(positions.shape(), positions.shape() + positions.ndim());
  shape.push_back(table.shape(1));
  py::array out = output_for(table, shape, out_obj);
  char* dst = static_cast<char*>(out.mutable_data());
  int64_t bad = -1;
  {
    py::gil_scoped_release nogil;
    bad = posembed::first_invalid_fraction(pos, n, rv.rows);
    if (bad < 0) {
      posembed::lerp(rv, static_cast<posembed::FloatKind>(kind), pos, n, dst, out_obj.is_none());
    }
  }
  if (bad >= 0) {
    std::string msg = "position " + py::repr(py::float_(pos[bad])).cast<std::string>();
    if (positions.ndim() > 0) msg += " at " + index_text(positions, bad);
    msg += rv.rows > 0 ? " is not a finite number in [0, " + std::to_string(rv.rows - 1) +
                             "] (the table has " + std::to_string(rv.rows) + " rows)"
                       : " cannot be looked up: the table has no rows";
    throw py::value_error(msg);
  }
  return out;
}

py::array resample_grid(const py::array& table, int kind, int64_t prefix, int64_t h, int64_t w,
                        int64_t h2, int64_t w2, int method, int align) {
  const posembed::RowsView rv = float_rows(table, kind);
  if (prefix < 0 || h < 1 || w < 1 || h2 < 1 || w2 < 1 || prefix + h * w != rv.rows ||
      (method != 0 && method != 1) || align == 0) {
    throw py::value_error("resample_grid: inconsistent sizes, method or align");
  }
  py::array out(table.dtype(), std::vector<py::ssize_t>{prefix + h2 * w2, table.shape(1)});
  char* dst = static_cast<char*>(out.mutable_data());
  {
    py::gil_scoped_release nogil;
    posembed::resample_grid(rv, static_cast<posembed::FloatKind>(kind), prefix, h, w, h2, w2,
                            static_cast<posembed::GridMethod>(method), align_of(align), dst);
  }
  return out;
}

// tokens: 1-D C-contiguous; doc_offsets: int64 C-contiguous, validated by the
// Python layer (starts at 0, non-decreasing, ends at len(tokens)); pad: one
// element of the tokens' dtype.
py::tuple windows(const py::array& tokens, const py::array& doc_offsets, int64_t size,
                  int64_t step, int tail, const py::array& pad, const py::object& out_obj) {
  if (tokens.ndim() != 1 || !c_contiguous(tokens) || doc_offsets.ndim() != 1 ||
      !c_contiguous(doc_offsets) || doc_offsets.itemsize() != 8 || doc_offsets.size() < 1 ||
      pad.size() != 1 || pad.itemsize() != tokens.itemsize() || size < 1 || step < 1 ||
      step > size || tail < 0 || tail > 2) {
    throw py::value_error("windows: inconsistent arguments");
  }
  const auto* offs = static_cast<const int64_t*>(doc_offsets.data());
  const auto ndocs = static_cast<int64_t>(doc_offsets.size()) - 1;
  if (offs[0] != 0 || offs[ndocs] != static_cast<int64_t>(tokens.size())) {
    throw py::value_error("windows: offsets must run from 0 to len(tokens)");
  }
  for (int64_t k = 0; k < ndocs; ++k) {
    if (offs[k + 1] < offs[k]) throw py::value_error("windows: offsets must not decrease");
  }
  const auto t = static_cast<posembed::Tail>(tail);
  std::vector<int64_t> win(static_cast<size_t>(ndocs + 1));
  posembed::window_offsets(offs, ndocs, size, step, t, win.data());
  const int64_t n = win[static_cast<size_t>(ndocs)];
  py::array out;
  if (out_obj.is_none()) {
    out = py::array(tokens.dtype(), std::vector<py::ssize_t>{n, size});
  } else {  // checked by the Python layer; re-checked here for memory safety
    out = out_obj.cast<py::array>();
    if (out.ndim() != 2 || out.shape(0) != n || out.shape(1) != size ||
        out.itemsize() != tokens.itemsize() || !c_contiguous(out) || !out.writeable()) {
      throw py::value_error("windows: out has the wrong shape or layout");
    }
  }
  py::array_t<int64_t> starts(n), lengths(n), documents(n);
  const posembed::WindowsOut wo{static_cast<char*>(out.mutable_data()), starts.mutable_data(),
                                lengths.mutable_data(), documents.mutable_data()};
  const auto* src = static_cast<const char*>(tokens.data());
  const auto* pv = static_cast<const char*>(pad.data());
  const auto itemsize = static_cast<int64_t>(tokens.itemsize());
  {
    py::gil_scoped_release nogil;
    posembed::fill_windows(src, itemsize, offs, ndocs, win.data(), size, step, t, pv, wo);
  }
  return py::make_tuple(out, starts, lengths, documents);
}

using I64 = py::array_t<int64_t, py::array::c_style>;

// First window of each document (ndocs + 1 entries) from the sorted document
// index of every window, checking what memory safety needs.
std::vector<int64_t> windows_per_document(const I64& doc_offsets, const I64& starts,
                                          const I64& lengths, const I64& documents,
                                          int64_t size) {
  const auto ndocs = static_cast<int64_t>(doc_offsets.size()) - 1;
  const auto n = static_cast<int64_t>(starts.size());
  if (ndocs < 0 || lengths.size() != starts.size() || documents.size() != starts.size() ||
      size < 1) {
    throw py::value_error("windows: inconsistent window arrays");
  }
  std::vector<int64_t> win(static_cast<size_t>(ndocs + 1), 0);
  const int64_t* docs = documents.data();
  const int64_t* offs = doc_offsets.data();
  for (int64_t w = 0; w < n; ++w) {
    const int64_t d = docs[w];
    if (d < 0 || d >= ndocs || (w > 0 && d < docs[w - 1]) || starts.data()[w] < 0 ||
        lengths.data()[w] < 0 || lengths.data()[w] > size ||
        starts.data()[w] + lengths.data()[w] > offs[d + 1] - offs[d] ||
        (w > 0 && d == docs[w - 1] &&
         (starts.data()[w] < starts.data()[w - 1] ||
          starts.data()[w] + lengths.data()[w] < starts.data()[w - 1] + lengths.data()[w - 1]))) {
      throw py::value_error("windows: window arrays do not describe these documents");
    }
    ++win[static_cast<size_t>(d + 1)];
  }
  for (int64_t k = 0; k < ndocs; ++k) win[static_cast<size_t>(k + 1)] += win[static_cast<size_t>(k)];
  return win;
}

py::array window_owner(const I64& doc_offsets, const I64& starts, const I64& lengths,
                       const I64& documents, int64_t size, int rule) {
  if (rule != 0 && rule != 1) throw py::value_error("window_owner: unknown rule");
  const std::vector<int64_t> win =
      windows_per_document(doc_offsets, starts, lengths, documents, size);
  const auto ndocs = static_cast<int64_t>(doc_offsets.size()) - 1;
  const auto n = static_cast<int64_t>(starts.size());
  py::array_t<bool> own(std::vector<py::ssize_t>{n, size});
  bool* dst = own.mutable_data();
  {
    py::gil_scoped_release nogil;
    posembed::window_owner(doc_offsets.data(), ndocs, win.data(), starts.data(), lengths.data(),
                           size, rule, dst);
  }
  return own;
}

template <class T>
py::array stitch_typed(const py::array& values, const I64& doc_offsets, const I64& starts,
                       const I64& lengths, const std::vector<int64_t>& win, int64_t size,
                       int reduce, const py::object& own_obj, const py::object& fill) {
  const auto ndocs = static_cast<int64_t>(doc_offsets.size()) - 1;
  const int64_t tokens = doc_offsets.data()[ndocs];
  const auto f = static_cast<int64_t>(values.shape(2));
  const bool* own = nullptr;
  py::array_t<bool, py::array::c_style> own_arr;
  if (!own_obj.is_none()) {
    own_arr = own_obj.cast<py::array_t<bool, py::array::c_style>>();
    if (own_arr.size() != values.shape(0) * size) throw py::value_error("stitch: owner shape");
    own = own_arr.data();
  }
  py::array_t<T> out(std::vector<py::ssize_t>{tokens, f});
  const T fill_value = fill.cast<T>();
  const T* src = static_cast<const T*>(values.data());
  T* dst = out.mutable_data();
  int64_t unfit = -1;
  {
    py::gil_scoped_release nogil;
    unfit = posembed::stitch<T>(src, f, doc_offsets.data(), ndocs, win.data(), starts.data(),
                                lengths.data(), size, static_cast<posembed::Reduce>(reduce),
                                own, fill_value, dst);
  }
  if (unfit >= 0) {
    PyErr_Format(PyExc_ValueError,
                 "values: the sum over windows of token %lld lies outside %s's range "
                 "(reduce='sum' adds integers exactly); sum in float64 "
                 "(values.astype(numpy.float64)) or use reduce='mean'",
                 static_cast<long long>(unfit), std::is_signed_v<T> ? "int64" : "uint64");
    throw py::error_already_set();
  }
  return out;
}

// values: (n, size, f) C-contiguous of float32, float64, int64 or uint64 (the
// Python layer converts); returns (N, f) of the same type.
py::array stitch(const py::array& values, const I64& doc_offsets, const I64& starts,
                 const I64& lengths, const I64& documents, int64_t size, int reduce,
                 const py::object& own, const py::object& fill) {
  const std::vector<int64_t> win =
      windows_per_document(doc_offsets, starts, lengths, documents, size);
  if (values.ndim() != 3 || !c_contiguous(values) || values.shape(0) != starts.size() ||
      values.shape(1) != size || reduce < 0 || reduce > 3 || (reduce == 3 && own.is_none())) {
    throw py::value_error("stitch: values must be (n, size, f) and C-contiguous");
  }
  const char kind = values.dtype().kind();
  const auto isz = values.itemsize();
  if (kind == 'f' && isz == 4) return stitch_typed<float>(values, doc_offsets, starts, lengths, win, size, reduce, own, fill);
  if (kind == 'f' && isz == 8) return stitch_typed<double>(values, doc_offsets, starts, lengths, win, size, reduce, own, fill);
  if (kind == 'i' && isz == 8) return stitch_typed<int64_t>(values, doc_offsets, starts, lengths, win, size, reduce, own, fill);
  if (kind == 'u' && isz == 8) return stitch_typed<uint64_t>(values, doc_offsets, starts, lengths, win, size, reduce, own, fill);
  throw py::type_error("stitch: values must be float32, float64, int64 or uint64");
}

// ids and positions: int64, checked in range by the Python layer (the
// kernel clamps its reads all the same). Without positions, row r's position
// is offset + r % period.
// Whether every value of p[0..n) is in [0, rows): one branch-free pass (it
// vectorises), so the checks cost little next to the kernel they guard.
bool all_in_range(const int64_t* p, int64_t n, int64_t rows) {
  uint64_t bad = 0;
  const auto top = static_cast<uint64_t>(rows);
  for (int64_t i = 0; i < n; ++i) bad |= static_cast<uint64_t>(static_cast<uint64_t>(p[i]) >= top);
  return bad == 0;
}

// Raised when a pre-scan finds an index out of range; the Python layer
// catches it and reports the first bad value with its place (the slow path
// runs only on error).
[[noreturn]] void raise_out_of_range(const char* name) {
  throw py::index_error(std::string(name) + " out of range");
}

py::array embed(const py::array& tokens, const py::array& pos, int kind, const I64& ids,
                const py::object& positions_obj, int64_t offset, int64_t period, bool active,
                uint64_t seed, uint32_t threshold, double scale, const py::object& out_obj,
                int64_t first_row) {
  const posembed::RowsView tv = float_rows(tokens, kind);
  const posembed::RowsView pv = float_rows(pos, kind);
  const auto rows = static_cast<int64_t>(ids.size());
  if (tv.cols != pv.cols || (rows > 0 && (tv.rows < 1 || pv.rows < 1))) {
    throw py::value_error("embed: tables must share their columns and have rows");
  }
  const int64_t* positions = nullptr;
  I64 pos_arr;
  if (!positions_obj.is_none()) {
    pos_arr = positions_obj.cast<I64>();
    const auto count = static_cast<int64_t>(pos_arr.size());
    if (rows > 0 && (period < 1 || count != period || rows % period != 0)) {
      throw py::value_error("embed: positions must repeat with the period");
    }
    positions = pos_arr.data();
  } else if (rows > 0 && (period < 1 || offset < 0 || offset + period > pv.rows ||
                          rows % period != 0)) {
    throw py::value_error("embed: offset and period do not fit the position table");
  }
  std::vector<py::ssize_t> shape(ids.shape(), ids.shape() + ids.ndim());
  shape.push_back(tokens.shape(1));
  py::array out = output_for(tokens, shape, out_obj);
  if (first_row < 0 || first_row > (int64_t{1} << 62) / std::max<int64_t>(tv.cols, 1)) {
    throw py::value_error("embed: first_row must be in 0..2^62 / d");
  }
  const posembed::DropoutSpec drop{active, posembed::random_key(seed), threshold, scale,
                                   first_row};
  char* dst = static_cast<char*>(out.mutable_data());
  bool ids_ok = true;
  bool pos_ok = true;
  {
    py::gil_scoped_release nogil;
    // Checked before anything is written (the kernel also clamps its reads).
    ids_ok = all_in_range(ids.data(), rows, tv.rows);
    pos_ok = positions == nullptr || all_in_range(positions, std::min(rows, period), pv.rows);
    if (ids_ok && pos_ok) {
      posembed::embed(tv, ids.data(), rows, pv, positions, offset, period,
                      static_cast<posembed::FloatKind>(kind), drop, dst);
    }
  }
  if (!ids_ok) raise_out_of_range("token_ids");
  if (!pos_ok) raise_out_of_range("positions");
  return out;
}

py::array dropout_mask(int64_t n, uint64_t seed, uint32_t threshold) {
  if (n < 0) throw py::value_error("dropout_mask: negative size");
  py::array_t<bool> mask(n);
  bool* dst = mask.mutable_data();
  {
    py::gil_scoped_release nogil;
    posembed::dropout_mask(posembed::random_key(seed), threshold, n, dst);
  }
  return mask;
}

// grad: (count, cols) C-contiguous of the float kind; positions: int64 in
// [0, length) (checked here before anything is written; clamped by the kernel); out:
// (length, cols) of grad's dtype, zero already unless zero_unused.
void gather_backward(const py::array& grad, int kind, const I64& positions, int64_t length,
                     py::array& out, bool zero_unused) {
  static constexpr int64_t sizes[] = {2, 2, 4, 8};
  if (kind < 0 || kind > 3 || grad.ndim() != 2 || !c_contiguous(grad) ||
      grad.itemsize() != sizes[kind] || grad.shape(0) != positions.size() || length < 0 ||
      out.ndim() != 2 || out.shape(0) != length || out.shape(1) != grad.shape(1) ||
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
      posembed::gather_backward(src, cols, positions.data(), count, length,
                                static_cast<posembed::FloatKind>(kind), zero_unused, dst);
    }
  }
  if (!ok) raise_out_of_range("positions");
}

char* writeable_bytes(py::array& a, const char* name) {
  if (!c_contiguous(a) || !a.writeable()) {
    throw py::value_error(std::string(name) + " must be a writeable C-contiguous array");
  }
  return static_cast<char*>(a.mutable_data());
}

int threads_or_all(int threads) { return threads > 0 ? threads : posembed::get_num_threads(); }

void roofline_fill(py::array buf, int value, bool stream, int threads) {
  char* dst = writeable_bytes(buf, "buf");
  const auto n = static_cast<int64_t>(buf.nbytes());
  py::gil_scoped_release nogil;
  posembed::roofline_fill(dst, n, static_cast<unsigned char>(value), threads_or_all(threads), stream);
}

uint64_t roofline_spin(int64_t n, int threads) {
  if (n < 0) throw py::value_error("n must be >= 0");
  py::gil_scoped_release nogil;
  return posembed::roofline_spin(n, threads_or_all(threads));
}

void roofline_copy(py::array dst, const py::array& src, bool stream, int threads) {
  char* d = writeable_bytes(dst, "dst");
  if (!c_contiguous(src) || src.nbytes() != dst.nbytes()) {
    throw py::value_error("src must be C-contiguous with as many bytes as dst");
  }
  const auto* s = static_cast<const char*>(src.data());
  const auto n = static_cast<int64_t>(dst.nbytes());
  py::gil_scoped_release nogil;
  posembed::roofline_copy(d, s, n, threads_or_all(threads), stream);
}

// Every level this CPU can run, lowest first.
py::list simd_levels() {
  py::list levels;
  const int best = static_cast<int>(posembed::cpu_simd_level());
  for (int l = 0; l <= best; ++l) {
    levels.append(posembed::simd_level_name(static_cast<posembed::SimdLevel>(l)));
  }
  return levels;
}

// A caller that is itself an OpenMP team (a C extension's parallel region):
// each of its `outer` threads runs a kernel-sized parallel loop of n items.
int team_sizes_in_openmp_team(int outer, int64_t n) {
  if (outer < 1 || n < 1) throw py::value_error("outer and n must be >= 1");
  std::atomic<int> largest{0};
  {
    py::gil_scoped_release release;
#pragma omp parallel num_threads(outer)
    {
      std::atomic<int> used{0};
      posembed::parallel_for(
          n, posembed::get_num_threads(),
          [&](int64_t, int64_t, int tid) {
            int seen = used.load();
            while (tid + 1 > seen && !used.compare_exchange_weak(seen, tid + 1)) {
            }
          },
          1);
      int seen = largest.load();
      while (used.load() > seen && !largest.compare_exchange_weak(seen, used.load())) {
      }
    }
  }
  return largest.load();
}

#ifndef POSEMBED_SANITIZED
#define POSEMBED_SANITIZED 0  // 1 in a POSEMBED_SANITIZE build (ASan + UBSan)
#endif

py::dict config() {
  return py::dict("compiler"_a = POSEMBED_COMPILER, "build_type"_a = POSEMBED_BUILD_TYPE,
                  "sanitized"_a = POSEMBED_SANITIZED != 0,
                  "openmp"_a = posembed::openmp_enabled(),
                  "openmp_version"_a = posembed::openmp_version(),
                  "simd"_a = posembed::simd_level_name(posembed::simd_level()),
                  "cpu_simd"_a = posembed::simd_level_name(posembed::cpu_simd_level()),
                  "simd_levels"_a = simd_levels(),
                  "dropout_rng"_a = posembed::random_bits_impl(),
                  "num_threads"_a = posembed::get_num_threads(),
                  "default_num_threads"_a = posembed::default_num_threads(),
                  "num_threads_set"_a = posembed::num_threads_set(),
                  "max_num_threads"_a = posembed::max_num_threads(),
                  "forked_child"_a = posembed::forked_child(),
                  "parallel_min_bytes"_a = posembed::parallel_min_bytes(),
                  "stream_min_bytes"_a = posembed::stream_min_bytes());
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "posembed's compiled kernels; use the functions in the posembed package instead.";
  // A POSEMBED_SIMD that cannot be honoured stops the import: running another
  // level than the one asked for would make a comparison of levels a lie.
  const std::string simd_error = posembed::simd_env_error();
  if (!simd_error.empty()) throw std::runtime_error(simd_error);
  m.def("gather", &gather, "table"_a, "positions"_a, "mode"_a, "out"_a = py::none(),
        "fresh"_a = false);
  m.def("interpolate", &interpolate, "table"_a, "kind"_a, "length"_a, "align"_a, "first"_a = 0,
        "out"_a = py::none(), "fresh"_a = false);
  m.def("lerp", &lerp, "table"_a, "kind"_a, "positions"_a, "out"_a = py::none());
  m.def("resample_grid", &resample_grid, "table"_a, "kind"_a, "prefix"_a, "h"_a, "w"_a, "h2"_a,
        "w2"_a, "method"_a, "align"_a);
  m.def("embed", &embed, "tokens"_a, "pos"_a, "kind"_a, "ids"_a, "positions"_a, "offset"_a,
        "period"_a, "active"_a, "seed"_a, "threshold"_a, "scale"_a, "out"_a = py::none(),
        "first_row"_a = 0);
  m.def("dropout_mask", &dropout_mask, "n"_a, "seed"_a, "threshold"_a);
  m.def("gather_backward", &gather_backward, "grad"_a, "kind"_a, "positions"_a, "length"_a,
        "out"_a, "zero_unused"_a);
  m.def("windows", &windows, "tokens"_a, "doc_offsets"_a, "size"_a, "step"_a, "tail"_a, "pad"_a,
        "out"_a = py::none());
  m.def("window_owner", &window_owner, "doc_offsets"_a, "starts"_a, "lengths"_a, "documents"_a,
        "size"_a, "rule"_a);
  m.def("stitch", &stitch, "values"_a, "doc_offsets"_a, "starts"_a, "lengths"_a, "documents"_a,
        "size"_a, "reduce"_a, "own"_a, "fill"_a);
  m.def("set_num_threads", &posembed::set_num_threads, "n"_a);
  m.def("get_num_threads", &posembed::get_num_threads);
  m.def("_set_thresholds", &posembed::set_thresholds, "parallel_min_bytes"_a,
        "stream_min_bytes"_a, "Override the work thresholds (-1 restores a default).");
  m.def("_last_team_size", &posembed::last_team_size,
        "Threads that ran the most recent parallel section (1 if it stayed serial).");
  m.def("_calls_in_flight_peak", &posembed::calls_in_flight_peak, "reset"_a = false,
        "Most kernel calls in flight at once since the last reset (diagnostics).");
  m.def("_helpers_busy_peak", &posembed::helpers_busy_peak, "reset"_a = false,
        "Most helper threads busy at once across calls since the last reset (diagnostics).");
  m.def("_team_sizes_in_openmp_team", &team_sizes_in_openmp_team, "outer"_a, "n"_a,
        "Largest team a call made from each thread of an OpenMP team used (diagnostics).");
  m.def("config", &config);
  m.def("roofline_fill", &roofline_fill, "buf"_a, "value"_a = 0, "stream"_a = false,
        "threads"_a = 0);
  m.def("roofline_spin", &roofline_spin, "n"_a, "threads"_a = 0);
  m.def("roofline_copy", &roofline_copy, "dst"_a, "src"_a, "stream"_a = false, "threads"_a = 0);
}
