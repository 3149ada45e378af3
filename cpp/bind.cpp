// The helpers every binding file shares (declared in bind.hpp).
#include "bind.hpp"

namespace posembed::bind {

bool c_contiguous(const py::array& a) { return (a.flags() & py::array::c_style) != 0; }

IntKind int_kind(const py::array& a) {
  const py::dtype dt = a.dtype();
  const char kind = dt.kind();
  const auto size = dt.itemsize();
  if (kind == 'i' || kind == 'u') {
    const bool s = kind == 'i';
    switch (size) {
      case 1: return s ? IntKind::i8 : IntKind::u8;
      case 2: return s ? IntKind::i16 : IntKind::u16;
      case 4: return s ? IntKind::i32 : IntKind::u32;
      case 8: return s ? IntKind::i64 : IntKind::u64;
      default: break;
    }
  }
  throw py::type_error("positions must have an integer dtype (int8..int64, uint8..uint64); got " +
                       py::str(dt).cast<std::string>());
}

std::string index_text(const py::array& a, const char* name, int64_t flat) {
  const auto nd = a.ndim();
  std::vector<int64_t> idx(static_cast<size_t>(nd));
  for (auto k = nd; k-- > 0;) {
    const auto extent = static_cast<int64_t>(a.shape(k));
    idx[static_cast<size_t>(k)] = flat % extent;
    flat /= extent;
  }
  std::string s = std::string(name) + "[";
  for (size_t k = 0; k < idx.size(); ++k) {
    if (k) s += ", ";
    s += std::to_string(idx[k]);
  }
  return s + "]";
}

RowsView float_rows(const py::array& t, FloatKind kind) {
  if (t.ndim() != 2) throw py::value_error("table must be 2-D");
  const int64_t size = element_size(kind);
  const bool strided = t.shape(0) > 0 && t.shape(1) > 1 && t.strides(1) != t.itemsize();
  if (t.itemsize() != size || strided) {
    throw py::value_error("table rows must be contiguous and match the float kind");
  }
  return {static_cast<const char*>(t.data()), static_cast<int64_t>(t.shape(0)),
          static_cast<int64_t>(t.shape(1)), static_cast<int64_t>(t.strides(0))};
}

py::array output_array(const py::object& out, const py::dtype& dtype, const Shape& shape) {
  if (out.is_none()) return py::array(dtype, shape);
  if (!py::isinstance<py::array>(out)) throw py::type_error("out must be a numpy.ndarray");
  auto arr = py::reinterpret_borrow<py::array>(out);
  if (Shape(arr.shape(), arr.shape() + arr.ndim()) != shape || arr.itemsize() != dtype.itemsize() ||
      !c_contiguous(arr) || !arr.writeable()) {
    throw py::value_error("out must be a writeable C-contiguous array of the result's shape");
  }
  return arr;
}

bool all_in_range(const int64_t* p, int64_t n, int64_t rows) {
  uint64_t bad = 0;
  const auto top = static_cast<uint64_t>(rows);
  for (int64_t i = 0; i < n; ++i) bad |= static_cast<uint64_t>(static_cast<uint64_t>(p[i]) >= top);
  return bad == 0;
}

void raise_out_of_range(const char* name) {
  throw py::index_error(std::string(name) + " out of range");
}

void bind_shared_enums(py::module_& m) {
  // Member names are the words the Python API takes, so one table serves
  // both: posembed looks a user's string up in Enum.__members__.
  py::enum_<FloatKind>(m, "FloatKind", "Element type of a float table.")
      .value("float16", FloatKind::f16)
      .value("bfloat16", FloatKind::bf16)
      .value("float32", FloatKind::f32)
      .value("float64", FloatKind::f64);
  py::enum_<Align>(m, "Align", "Where output row i samples the input rows.")
      .value("scale", Align::scale)
      .value("half_pixel", Align::half_pixel)
      .value("corners", Align::corners);
}

}  // namespace posembed::bind
