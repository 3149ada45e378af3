// Bindings of the batch order: the samples at runs of global positions
// (micro-batches, global batches) and at given positions.
#include <cstdint>
#include <limits>
#include <string>

#include "batch_order.hpp"
#include "bind.hpp"

namespace posembed::bind {
namespace {

using namespace pybind11::literals;

constexpr int64_t kMaxPosition = int64_t{1} << 62;

// An int64 array of `ndim` dimensions, C-contiguous, native order, aligned
// (the Python layer has made it so; this is the memory-safety check).
void check_int64(const py::array& a, py::ssize_t ndim, bool writeable, const char* name) {
  const bool ok = a.ndim() == ndim && c_contiguous(a) && a.dtype().kind() == 'i' &&
                  a.itemsize() == 8 && a.dtype().byteorder() != '>' &&
                  (reinterpret_cast<uintptr_t>(a.data()) % 8) == 0 && (!writeable || a.writeable());
  if (!ok) {
    throw py::type_error(std::string("batch order: ") + name + " must be a " +
                         std::to_string(ndim) + "-D C-contiguous int64 array" +
                         (writeable ? ", writeable" : ""));
  }
}

void rows(py::array out, int64_t first, int64_t stride, int64_t n, uint64_t seed,
          bool shuffle) {
  check_int64(out, 2, true, "out");
  const auto count = static_cast<int64_t>(out.shape(0));
  const auto width = static_cast<int64_t>(out.shape(1));
  if (n < 1 || first < 0 || stride < 0) throw py::value_error("batch order: inconsistent arguments");
  if (count == 0 || width == 0) return;
  // The last position, first + (count - 1) * stride + width - 1, below 2^62, computed without overflow.
  const int64_t room = kMaxPosition - first - width;
  if (room < 0 || (count > 1 && stride > 0 && (count - 1) > room / stride)) {
    throw py::value_error("batch order: positions reach 2^62");
  }
  auto* data = static_cast<int64_t*>(out.mutable_data());
  KernelGilRelease nogil(count * width * 8);
  batch_order_rows(data, count, width, first, stride, n, seed, shuffle);
}

void samples(const py::array& positions, py::array out, int64_t n, uint64_t seed,
             bool shuffle) {
  check_int64(positions, 1, false, "positions");
  check_int64(out, 1, true, "out");
  if (positions.size() != out.size() || n < 1) {
    throw py::value_error("batch order: inconsistent arguments");
  }
  const auto count = static_cast<int64_t>(positions.size());
  const auto* p = static_cast<const int64_t*>(positions.data());
  // The positions are the Python layer's private copy; checked here once more
  // so that no position can make the kernel wrap.
  for (int64_t k = 0; k < count; ++k) {
    if (p[k] < 0 || p[k] >= kMaxPosition) {
      throw py::index_error("batch order: position " + std::to_string(p[k]) +
                            " is out of range: positions are 0..2^62 - 1");
    }
  }
  auto* data = static_cast<int64_t*>(out.mutable_data());
  KernelGilRelease nogil(count * 8);
  batch_order_samples(p, data, count, n, seed, shuffle);
}

}  // namespace

void bind_batch_order(py::module_& m) {
  m.def("batch_order_rows", &rows, "out"_a, "first"_a, "stride"_a, "n"_a, "seed"_a, "shuffle"_a);
  m.def("batch_order_samples", &samples, "positions"_a, "out"_a, "n"_a, "seed"_a, "shuffle"_a);
}

}  // namespace posembed::bind
