// What every binding file shares: array checks, the one out= helper, and the
// registration function of each kernel family. Binding files convert and
// check arguments while holding the GIL, release it around the kernel, and
// turn kernel results into Python exceptions; nothing else.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gather.hpp"
#include "half.hpp"
#include "interpolate.hpp"

namespace posembed::bind {

namespace py = pybind11;

using I64 = py::array_t<int64_t, py::array::c_style>;
using Shape = std::vector<py::ssize_t>;

bool c_contiguous(const py::array& a);

// The IntKind of an integer array (TypeError for any other dtype).
IntKind int_kind(const py::array& a);

// "positions[1, 3]" for the flat C-order index `flat` of `a`.
std::string index_text(const py::array& a, const char* name, int64_t flat);

// A 2-D table of `kind` whose columns are adjacent (rows may be strided).
RowsView float_rows(const py::array& t, FloatKind kind);

// The array a kernel writes: a new one of `dtype` and `shape` when out is
// None, else out itself, refused unless it is an ndarray of that shape and
// item size, C-contiguous and writeable. The Python layer has already checked
// out= and written the friendly messages; this is the memory-safety check.
py::array output_array(const py::object& out, const py::dtype& dtype, const Shape& shape);

// Whether every value of p[0..n) is in [0, rows): one branch-free pass (it
// vectorises), so the check costs little next to the kernel it guards.
bool all_in_range(const int64_t* p, int64_t n, int64_t rows);

// Raised when a pre-scan finds an index out of range; the Python layer
// catches it and reports the first bad value with its place (the slow path
// runs only on error).
[[noreturn]] void raise_out_of_range(const char* name);

// The enums shared by several families (float element types, index
// conventions), bound once.
void bind_shared_enums(py::module_& m);

void bind_runtime(py::module_& m);
void bind_gather(py::module_& m);
void bind_interpolate(py::module_& m);
void bind_resample_grid(py::module_& m);
void bind_embed(py::module_& m);
void bind_windows(py::module_& m);
// Roofline and thread probes for the benchmark and the tests (posembed._core._probes).
void bind_probes(py::module_& m);

}  // namespace posembed::bind
