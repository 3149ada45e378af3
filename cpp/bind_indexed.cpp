// Bindings of the indexed-dataset writer's token writes.
#include <cerrno>
#include <cstdint>
#include <string>

#include "bind.hpp"
#include "indexed.hpp"

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

}  // namespace

void bind_indexed(py::module_& m) {
  m.def("write_marked", &write_marked, "fd"_a, "data"_a, "cuts"_a, "mark"_a, "offset"_a);
}

}  // namespace posembed::bind
