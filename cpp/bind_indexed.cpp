// Bindings of the indexed-dataset writer's token writes.
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "bind.hpp"
#include "indexed.hpp"
#include "mapped.hpp"
#include "runtime.hpp"

namespace posembed::bind {
namespace {

using namespace pybind11::literals;

// The tokens `data` (1-D, C-contiguous, little-endian as the file holds
// them) with `mark` (one item of the same size) before each of `cuts`
// (sorted int64 positions in 0..len(data)), written to `fd` at byte `offset`.
void write_marked(int fd, const py::array& data, const I64& cuts, const py::array& mark,
                  int64_t offset) {
  if (data.ndim() != 1 || !c_contiguous(data)) {
    throw py::value_error("write_marked: data must be a 1-D C-contiguous array");
  }
  if (cuts.ndim() != 1) throw py::value_error("write_marked: cuts must be 1-D");
  const auto item = static_cast<int64_t>(data.itemsize());
  const auto ncuts = static_cast<int64_t>(cuts.size());
  if (ncuts > 0 && (mark.ndim() != 1 || mark.size() != 1 || mark.itemsize() != item)) {
    throw py::value_error("write_marked: mark must be one item of data's size");
  }
  if (offset < 0) throw py::value_error("write_marked: offset must be >= 0");
  MarkedWriteResult result;
  {
    py::gil_scoped_release nogil;
    result = posembed::write_marked(fd, static_cast<const uint8_t*>(data.data()),
                                    static_cast<int64_t>(data.size()), item, cuts.data(), ncuts,
                                    ncuts > 0 ? static_cast<const uint8_t*>(mark.data()) : nullptr,
                                    offset);
  }
  if (result.bad_cut >= 0) {
    throw py::value_error("write_marked: cuts[" + std::to_string(result.bad_cut) +
                          "] is out of order or outside 0.." + std::to_string(data.size()));
  }
  if (result.errno_value != 0) {
    errno = result.errno_value;
    PyErr_SetFromErrno(PyExc_OSError);
    throw py::error_already_set();
  }
}

IntKind kind_of(const py::dtype& dt, const char* name) {
  const char kind = dt.kind();
  const auto size = dt.itemsize();
  if ((kind == 'i' || kind == 'u') && (size == 1 || size == 2 || size == 4 || size == 8)) {
    const bool s = kind == 'i';
    switch (size) {
      case 1: return s ? IntKind::i8 : IntKind::u8;
      case 2: return s ? IntKind::i16 : IntKind::u16;
      case 4: return s ? IntKind::i32 : IntKind::u32;
      default: return s ? IntKind::i64 : IntKind::u64;
    }
  }
  throw py::type_error(std::string("copy_marked: ") + name + " must be an integer dtype");
}

// Tokens [first, last) of the file `in_fd` (of `in_dtype`, at byte
// `in_offset`) copied to `out_fd` at byte `out_offset` as `out_dtype`, with
// `mark` before each of `cuts` (see copy_marked in indexed.hpp). Returns
// (the first block whose ids fall outside [low, high], or -1; the byte at
// which the input ended before `last`, or -1).
std::pair<int64_t, int64_t> copy_marked(int in_fd, int64_t in_offset, const py::dtype& in_dtype,
                                        bool swap, int64_t first, int64_t last, int64_t block,
                                        const I64& cuts, int out_fd, const py::dtype& out_dtype,
                                        const py::array& mark, int64_t out_offset, int64_t low,
                                        uint64_t high) {
  const IntKind in = kind_of(in_dtype, "in_dtype"), out = kind_of(out_dtype, "out_dtype");
  if (cuts.ndim() != 1) throw py::value_error("copy_marked: cuts must be 1-D");
  if (mark.ndim() != 1 || mark.size() != 1 || mark.itemsize() != out_dtype.itemsize() ||
      !c_contiguous(mark)) {
    throw py::value_error("copy_marked: mark must be one item of out_dtype's size");
  }
  if (first < 0 || in_offset < 0 || out_offset < 0 || block < 1) {
    throw py::value_error("copy_marked: first, the offsets and block must be >= 0 (block >= 1)");
  }
  // the mark is copied: the caller's array may change while the GIL is released
  uint8_t marker[8] = {};
  std::memcpy(marker, mark.data(), static_cast<size_t>(mark.itemsize()));
  CopyMarkedResult result;
  {
    py::gil_scoped_release nogil;
    result = posembed::copy_marked(in_fd, in_offset, in, swap, first, last, block, cuts.data(),
                                   static_cast<int64_t>(cuts.size()), out_fd, out, marker,
                                   out_offset, low, high, get_num_threads());
  }
  if (result.bad_cuts) {
    throw py::value_error("copy_marked: cuts must rise within (" + std::to_string(first) + ", " +
                          std::to_string(last) + "]");
  }
  if (result.errno_value != 0) {
    errno = result.errno_value;
    PyErr_SetFromErrno(PyExc_OSError);
    throw py::error_already_set();
  }
  return {result.stopped, result.short_at};
}

}  // namespace

void bind_indexed(py::module_& m) {
  py::class_<FileMap, std::shared_ptr<FileMap>>(m, "FileMap")
      .def(py::init([](int fd, int64_t size) {
             if (fd < 0 || size < 0) throw py::value_error("FileMap: fd and size must be >= 0");
             return std::make_shared<FileMap>(fd, size);
           }),
           "fd"_a, "size"_a)
      .def_property_readonly("size", &FileMap::size);
  m.def("write_marked", &write_marked, "fd"_a, "data"_a, "cuts"_a, "mark"_a, "offset"_a);
  m.def("copy_marked", &copy_marked, "in_fd"_a, "in_offset"_a, "in_dtype"_a, "swap"_a, "first"_a,
        "last"_a, "block"_a, "cuts"_a, "out_fd"_a, "out_dtype"_a, "mark"_a, "out_offset"_a,
        "low"_a, "high"_a);
}

}  // namespace posembed::bind
