// What every binding file shares: array checks, the one out= helper, the one
// wording of an index out of range, and the registration function of each
// kernel family. Binding files convert and check arguments while holding the
// GIL, release it around the kernel, and turn kernel results into Python
// exceptions; nothing else.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "half.hpp"
#include "interpolate.hpp"
#include "mapped.hpp"
#include "positions.hpp"

namespace posembed::bind {

namespace py = pybind11;

// Releases the GIL for a kernel call that moves at least kReleaseBytes: a
// smaller one takes less time than handing the GIL over and back would (as
// NumPy keeps it for small loops), so it runs holding it.
constexpr int64_t kReleaseBytes = int64_t{1} << 15;
class __attribute__((visibility("hidden"))) KernelGilRelease {
 public:
  explicit KernelGilRelease(int64_t bytes) {
    if (bytes >= kReleaseBytes) release_.emplace();
  }

 private:
  std::optional<py::gil_scoped_release> release_;
};

using I64 = py::array_t<int64_t, py::array::c_style>;
using Shape = std::vector<py::ssize_t>;

// `value` if it is one of the enum's members 0..last. pybind11's enums take
// any integer (IndexMode(7)); a kernel's switch must never see one.
template <class E>
E member(E value, E last) {
  const auto v = static_cast<int>(value);
  if (v < 0 || v > static_cast<int>(last)) {
    throw py::value_error("not a member of the enum: " + std::to_string(v));
  }
  return value;
}

bool c_contiguous(const py::array& a);

// A C-contiguous, native-order integer array (int8..int64, uint8..uint64) as
// the kernels read it; TypeError or ValueError naming `name` otherwise. The
// Python layer has already made it so; this is the memory-safety check.
PositionsView positions_view(const py::array& a, const char* name);

// The values of `pos` as int64: `pos` itself when it already is, else widened
// into `storage` (call without the GIL, after the range scan).
const int64_t* int64_positions(const PositionsView& pos, std::vector<int64_t>& storage);

// "positions[1, 3]" for the flat C-order index `flat` of `a`.
std::string index_text(const py::array& a, const char* name, int64_t flat);

// A 2-D table of `kind` whose columns are adjacent (rows may be strided).
RowsView float_rows(const py::array& t, FloatKind kind);

// What a new output starts as when the caller passed no out=.
enum class Fill { none, zeros };

// The array a kernel writes: a new one of `dtype` and `shape` when out is
// None (zero pages from numpy.zeros with Fill::zeros, which a kernel writing
// only some rows needs), else out itself, refused unless it is an ndarray of
// that shape and item size, C-contiguous and writeable. The Python layer has
// already checked out= and written the friendly messages; this is the
// memory-safety check.
// Whether `a` is a numpy.ndarray itself (no subclass: a masked array or a
// matrix takes the full checks).
bool exact_ndarray(const py::handle& a);

// Whether `a` is an ndarray itself the kernels read as it is: native byte
// order, C-contiguous, aligned (the cheap check of a common call).
bool plain(const py::handle& a);

py::array output_array(const py::object& out, const py::dtype& dtype, const Shape& shape,
                       Fill fill = Fill::none);

// How an error names an integer argument that indexes the rows of a table.
struct IndexArg {
  std::string name;   // the argument: "token_ids"
  std::string noun;   // one of its values: "token id"
  std::string table;  // the argument that sets the table's size ("token_table",
                      // "length 5"), or "" when that goes without saying
};

// The one wording of indices outside a table of `rows` rows: the first bad
// value and its index in `indices` (the caller's array: any integer dtype, or
// Python ints in an object array), the table's size and the argument that
// sets it, the valid range, and how many are bad, as a range scan found them.
// "token id 50 at token_ids[1, 3] is out of range for a table of 50 rows
// (token_table; valid token ids are 0..49); 2 of 16 token ids are out of range"
[[noreturn]] void raise_out_of_range(const py::array& indices, const IndexArg& arg, int64_t rows,
                                     const OutOfRange& bad);

// The memory of a call's outputs, 64-byte aligned, shared by the arrays made
// on it (py::array(..., capsule)).
struct OutputBlock {
  void* data;
  size_t size;
};

// A block of `size` bytes (rounded up to 64), from a small cache of blocks
// whose arrays were all freed where one of that size waits: a loop that asks
// for outputs of the same shape each step gets memory written before, not
// fresh pages to fault in. Owned by the capsule returned.
py::capsule output_block(int64_t size);
// The same in two steps, the first without the GIL (on any thread): a block
// taken from the cache (or allocated; std::bad_alloc where it cannot be),
// then either wrapped into the capsule that owns it (with the GIL) or given
// back to the cache unused.
OutputBlock* take_output_block(int64_t size);
py::capsule wrap_output_block(OutputBlock* block);
void give_back_output_block(OutputBlock* block);

// The sizes of the freed blocks kept for reuse, oldest first (a probe).
std::vector<int64_t> kept_output_blocks();
// The size of the output block behind `base` (an array's .base), or -1 where
// it is not one of output_block's capsules.
int64_t output_block_size(const py::handle& base);

// The data and size of a posembed._core.FileMap passed as `mapping` (None:
// {null, 0}, read with pread), with the SIGBUS guard of mapped.hpp armed;
// the caller keeps the Python object alive for the call.
std::pair<const uint8_t*, int64_t> mapped_view(const py::object& mapping);

// A file's problem (see StableFile) as the reading kernels report it, naming
// `path`: a ValueError ("input changed while reading (...)" or "cannot be
// read (...)").
[[noreturn]] void raise_file_status(const FileStatus& status, const std::string& path,
                                    const FileStamp& stamp);

// The (size, mtime_ns, inode) tuple a reader was given for its file, or None:
// only a regular file is asked for.
FileStamp file_stamp(const py::object& stamp);

// `indices` copied into *out as int64 when the array is 1-D, of a native
// integer dtype, and each value lies in 0..count-1; false otherwise (the
// caller then checks them in Python, naming what is wrong). A view's
// elements need not be aligned.
bool index_numbers(const py::array& indices, int64_t count, std::vector<int64_t>* out);

// The enums shared by several families (float element types, index
// conventions) and check_in_range (the range check of indices that no kernel
// call will read), bound once.
void bind_shared(py::module_& m);

void bind_runtime(py::module_& m);
void bind_gather(py::module_& m);
void bind_interpolate(py::module_& m);
void bind_resample_grid(py::module_& m);
void bind_embed(py::module_& m);
void bind_windows(py::module_& m);
void bind_samples(py::module_& m);
void bind_batch_order(py::module_& m);
void bind_blend(py::module_& m);
void bind_indexed(py::module_& m);
void bind_pack(py::module_& m);
void bind_similarity(py::module_& m);
// Roofline and thread probes for the benchmark and the tests (posembed._core._probes).
void bind_probes(py::module_& m);

}  // namespace posembed::bind
