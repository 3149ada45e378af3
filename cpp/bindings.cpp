// The only file that sees Python: converts arrays to views, checks what
// memory safety needs (the Python layer has already checked the rest and
// written the friendly messages), releases the GIL around each kernel and
// turns kernel results into Python exceptions.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "gather.hpp"
#include "roofline.hpp"
#include "runtime.hpp"

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
                                       int64_t bad, int64_t rows, posembed::IndexMode mode) {
  if (rows == 0 && mode != posembed::IndexMode::raise) {
    throw py::index_error(std::string("cannot gather in mode '") + mode_name(mode) +
                          "' from a table of 0 rows: there is no row to clip or wrap to");
  }
  std::string msg = "position " + posembed::position_to_string(pv, bad);
  if (positions.ndim() > 0) msg += " at " + index_text(positions, bad);
  msg += " is out of range for a table of " + std::to_string(rows) + " rows";
  msg += rows > 0 ? " (valid positions are 0.." + std::to_string(rows - 1) + ")"
                  : " (it has no valid positions)";
  const int64_t count = posembed::count_invalid_positions(pv, rows);
  if (count > 1) {
    msg += "; " + std::to_string(count) + " of " + std::to_string(pv.count) +
           " positions are out of range";
  }
  throw py::index_error(msg);
}

py::array gather(const py::array& table, const py::array& positions, int mode_code,
                 const py::object& out_obj) {
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
  {
    py::gil_scoped_release nogil;
    bad = posembed::gather(tv, pv, mode, dst);
  }
  if (bad >= 0) raise_position_error(positions, pv, bad, tv.rows, mode);
  return out;
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

py::dict config() {
  return py::dict("compiler"_a = POSEMBED_COMPILER, "build_type"_a = POSEMBED_BUILD_TYPE,
                  "openmp"_a = posembed::openmp_enabled(),
                  "openmp_version"_a = posembed::openmp_version(),
                  "simd"_a = posembed::kernel_simd_level(),
                  "cpu_simd"_a = posembed::cpu_simd_level(),
                  "num_threads"_a = posembed::get_num_threads(),
                  "default_num_threads"_a = posembed::default_num_threads(),
                  "parallel_min_bytes"_a = posembed::kParallelMinBytes,
                  "stream_min_bytes"_a = posembed::kStreamMinBytes);
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "posembed's compiled kernels; use the functions in the posembed package instead.";
  m.def("gather", &gather, "table"_a, "positions"_a, "mode"_a, "out"_a = py::none());
  m.def("set_num_threads", &posembed::set_num_threads, "n"_a);
  m.def("get_num_threads", &posembed::get_num_threads);
  m.def("config", &config);
  m.def("roofline_fill", &roofline_fill, "buf"_a, "value"_a = 0, "stream"_a = false,
        "threads"_a = 0);
  m.def("roofline_copy", &roofline_copy, "dst"_a, "src"_a, "stream"_a = false, "threads"_a = 0);
}
