// The helpers every binding file shares (declared in bind.hpp).
#include "bind.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <tuple>
#include <cstdlib>
#include <mutex>
#include <new>

#include <pthread.h>

#include "mapped.hpp"

namespace posembed::bind {

namespace {

using namespace pybind11::literals;

IntKind int_kind(const py::array& a, const char* name) {
  const py::dtype dt = a.dtype();
  const char kind = dt.kind();
  if (kind == 'i' || kind == 'u') {
    const bool is_signed = kind == 'i';
    switch (dt.itemsize()) {
      case 1: return is_signed ? IntKind::i8 : IntKind::u8;
      case 2: return is_signed ? IntKind::i16 : IntKind::u16;
      case 4: return is_signed ? IntKind::i32 : IntKind::u32;
      case 8: return is_signed ? IntKind::i64 : IntKind::u64;
      default: break;
    }
  }
  throw py::type_error(std::string(name) +
                       " must have an integer dtype (int8..int64, uint8..uint64); got " +
                       py::str(dt).cast<std::string>());
}

// The range scan of Python ints in an object array: values past 64 bits,
// which no kernel can hold, reach no kernel; they are compared as they are.
OutOfRange find_out_of_range_in_objects(const py::array& indices, int64_t rows) {
  const py::int_ low(0);
  const py::int_ high(rows);
  OutOfRange bad{-1, 0};
  int64_t i = 0;
  for (const py::handle value : indices.attr("flat")) {
    if (value < low || value >= high) {
      if (!bad.found()) bad.first = i;
      ++bad.count;
    }
    ++i;
  }
  return bad;
}

// IndexError naming the first of `indices` outside [0, rows), if any: the
// kernels' own scan and wording, for indices that no kernel call will read
// (a table without rows, nothing to embed, Python ints past 64 bits).
void check_in_range(const py::array& indices, int64_t rows, const std::string& name,
                    const std::string& noun, const std::string& table) {
  OutOfRange bad{-1, 0};
  if (indices.dtype().kind() == 'O') {
    bad = find_out_of_range_in_objects(indices, rows);
  } else {
    const PositionsView pv = positions_view(indices, name.c_str());
    py::gil_scoped_release nogil;
    bad = find_out_of_range(pv, rows);
  }
  if (bad.found()) raise_out_of_range(indices, {name, noun, table}, rows, bad);
}

}  // namespace

bool c_contiguous(const py::array& a) { return (a.flags() & py::array::c_style) != 0; }

PositionsView positions_view(const py::array& a, const char* name) {
  const IntKind kind = int_kind(a, name);
  if (!c_contiguous(a) || !a.dtype().attr("isnative").cast<bool>()) {
    throw py::value_error(std::string(name) + " must be C-contiguous, in native byte order");
  }
  return {a.data(), kind, static_cast<int64_t>(a.size())};
}

const int64_t* int64_positions(const PositionsView& pos, std::vector<int64_t>& storage) {
  if (pos.kind == IntKind::i64) return static_cast<const int64_t*>(pos.data);
  storage.resize(static_cast<size_t>(pos.count));
  widen_positions(pos, storage.data());
  return storage.data();
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

bool exact_ndarray(const py::handle& a) {
  return Py_TYPE(a.ptr()) == py::detail::npy_api::get().PyArray_Type_;
}

bool plain(const py::handle& a) {
  if (!exact_ndarray(a)) return false;
  const auto arr = py::reinterpret_borrow<py::array>(a);
  const int flags = arr.flags();
  const bool contiguous = (flags & py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_) != 0;
  const bool aligned = (flags & py::detail::npy_api::NPY_ARRAY_ALIGNED_) != 0;
  const char order = arr.dtype().byteorder();
  return contiguous && aligned && (order == '=' || order == '|');
}

RowsView float_rows(const py::array& t, FloatKind kind) {
  member(kind, FloatKind::f64);
  if (t.ndim() != 2) throw py::value_error("table must be 2-D");
  const int64_t size = element_size(kind);
  const bool strided = t.shape(0) > 0 && t.shape(1) > 1 && t.strides(1) != t.itemsize();
  if (t.itemsize() != size || strided) {
    throw py::value_error("table rows must be contiguous and match the float kind");
  }
  return {static_cast<const char*>(t.data()), static_cast<int64_t>(t.shape(0)),
          static_cast<int64_t>(t.shape(1)), static_cast<int64_t>(t.strides(0))};
}

py::array output_array(const py::object& out, const py::dtype& dtype, const Shape& shape,
                       Fill fill) {
  if (out.is_none()) {
    if (fill == Fill::none) return py::array(dtype, shape);
    // numpy.zeros maps fresh zero pages: rows a kernel does not write cost nothing
    PYBIND11_CONSTINIT static py::gil_safe_call_once_and_store<py::object> zeros;
    const py::object& make = zeros.call_once_and_store_result([] {
      return py::module_::import("numpy").attr("zeros");
    }).get_stored();
    py::tuple dims(shape.size());
    for (size_t k = 0; k < shape.size(); ++k) dims[k] = shape[k];
    return make(dims, dtype);
  }
  if (!py::isinstance<py::array>(out)) throw py::type_error("out must be a numpy.ndarray");
  auto arr = py::reinterpret_borrow<py::array>(out);
  if (Shape(arr.shape(), arr.shape() + arr.ndim()) != shape || arr.itemsize() != dtype.itemsize() ||
      !c_contiguous(arr) || !arr.writeable()) {
    throw py::value_error("out must be a writeable C-contiguous array of the result's shape");
  }
  return arr;
}

void raise_out_of_range(const py::array& indices, const IndexArg& arg, int64_t rows,
                        const OutOfRange& bad) {
  // item() gives a Python int for every integer dtype, and the int itself
  // from an object array, so each value reads as the caller wrote it
  const std::string value = py::str(indices.attr("item")(bad.first));
  std::string msg = arg.noun + " " + value;
  if (indices.ndim() > 0) msg += " at " + index_text(indices, arg.name.c_str(), bad.first);
  msg += " is out of range for a table of " + std::to_string(rows) + " rows (";
  if (!arg.table.empty()) msg += arg.table + "; ";
  msg += rows > 0 ? "valid " + arg.noun + "s are 0.." + std::to_string(rows - 1)
                  : "it has no valid " + arg.noun + "s";
  msg += ")";
  if (bad.count > 1) {
    msg += "; " + std::to_string(bad.count) + " of " + std::to_string(indices.size()) + " " +
           arg.noun + "s are out of range";
  }
  throw py::index_error(msg);
}

// Blocks whose arrays were all freed, kept for the next batches of their
// size: at most kCachedBlocks of them, kCachedBytes in all, none larger than
// kCachedBlockBytes (a training batch is a few MiB; a whole plan cut at once
// is not kept once freed). The block freed last is kept, the oldest let go to
// make room: a loop that changed its batch shape reuses its new blocks; and
// the block freed last serves first (see output_block).
constexpr size_t kCachedBlocks = 8;
constexpr size_t kCachedBytes = size_t{256} << 20;
constexpr size_t kCachedBlockBytes = size_t{64} << 20;

namespace {

std::mutex cache_lock;
// The cache is also used without the GIL (GPT batches read ahead on threads
// of their own): held across fork() so that a child never inherits it locked.
[[maybe_unused]] const int cache_fork_guard =
    pthread_atfork([] { cache_lock.lock(); }, [] { cache_lock.unlock(); },
                   [] { cache_lock.unlock(); });
std::vector<OutputBlock>& cached_blocks() {
  static auto* blocks = new std::vector<OutputBlock>();  // never destroyed: no exit-order issue
  return *blocks;
}

void return_block(void* pointer) {
  auto* block = static_cast<OutputBlock*>(pointer);
  std::vector<void*> freed;
  if (block->size <= kCachedBlockBytes) {
    const std::lock_guard<std::mutex> lock(cache_lock);
    std::vector<OutputBlock>& blocks = cached_blocks();
    blocks.push_back(*block);
    size_t held = 0;
    for (const OutputBlock& b : blocks) held += b.size;
    size_t oldest = 0;
    while (blocks.size() - oldest > kCachedBlocks || held > kCachedBytes) {
      held -= blocks[oldest].size;
      freed.push_back(blocks[oldest].data);
      ++oldest;
    }
    blocks.erase(blocks.begin(), blocks.begin() + static_cast<std::ptrdiff_t>(oldest));
  } else {
    freed.push_back(block->data);
  }
  delete block;
  for (void* data : freed) std::free(data);  // outside the lock
}

}  // namespace

std::vector<int64_t> kept_output_blocks() {
  const std::lock_guard<std::mutex> lock(cache_lock);
  std::vector<int64_t> sizes;
  for (const OutputBlock& b : cached_blocks()) sizes.push_back(static_cast<int64_t>(b.size));
  return sizes;
}

constexpr const char* kOutputBlockName = "posembed.output_block";

int64_t output_block_size(const py::handle& base) {
  if (!PyCapsule_IsValid(base.ptr(), kOutputBlockName)) return -1;
  const auto* block =
      static_cast<const OutputBlock*>(PyCapsule_GetPointer(base.ptr(), kOutputBlockName));
  return static_cast<int64_t>(block->size);
}

OutputBlock* take_output_block(int64_t size) {
  const auto bytes = static_cast<size_t>((std::max<int64_t>(size, 64) + 63) / 64 * 64);
  void* data = nullptr;
  {
    const std::lock_guard<std::mutex> lock(cache_lock);
    std::vector<OutputBlock>& blocks = cached_blocks();
    // the block freed last first: it is the likeliest still in cache, and a
    // loop that keeps k batches alive then writes the same k + 1 blocks over
    // and over, never every block the cache holds in turn
    for (size_t i = blocks.size(); i-- > 0;) {
      if (blocks[i].size == bytes) {
        data = blocks[i].data;
        blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
    }
  }
  if (data == nullptr) data = std::aligned_alloc(64, bytes);
  if (data == nullptr) throw std::bad_alloc();
  return new OutputBlock{data, bytes};
}

void give_back_output_block(OutputBlock* block) { return_block(block); }

py::capsule wrap_output_block(OutputBlock* block) {
  return py::capsule(block, kOutputBlockName, &return_block);
}

py::capsule output_block(int64_t size) { return wrap_output_block(take_output_block(size)); }

std::pair<const uint8_t*, int64_t> mapped_view(const py::object& mapping) {
  if (mapping.is_none()) return {nullptr, 0};
  const auto& map = mapping.cast<const FileMap&>();
  arm_mapped_reads();
  return {map.data(), map.size()};
}

[[noreturn]] void raise_file_status(const FileStatus& status, const std::string& file,
                                    const FileStamp& stamp) {
  const char* path = file.c_str();
  switch (status.kind) {
    case FileStatus::unreadable:
      if (status.err == ENOENT) {
        PyErr_Format(PyExc_ValueError, "%s: input changed while reading (it was removed)", path);
      } else {
        PyErr_Format(PyExc_ValueError, "%s: cannot be read (%s)", path, std::strerror(status.err));
      }
      break;
    case FileStatus::not_regular:
      PyErr_Format(PyExc_ValueError,
                   "%s: input changed while reading (it is no longer a regular file); run again "
                   "on a stable file",
                   path);
      break;
    case FileStatus::resized:
      PyErr_Format(PyExc_ValueError,
                   "%s: input changed while reading (%lld bytes became %lld); run again on a "
                   "stable file",
                   path, static_cast<long long>(stamp.size), static_cast<long long>(status.size));
      break;
    case FileStatus::replaced:
      PyErr_Format(PyExc_ValueError,
                   "%s: input changed while reading (it was modified or replaced); run again "
                   "on a stable file",
                   path);
      break;
    case FileStatus::ok: PyErr_SetString(PyExc_RuntimeError, "raise_file_status: no file fault"); break;
  }
  throw py::error_already_set();
}

FileStamp file_stamp(const py::object& stamp) {
  if (stamp.is_none()) return FileStamp{};
  const auto t = stamp.cast<std::tuple<int64_t, int64_t, int64_t>>();
  return FileStamp{true, std::get<0>(t), std::get<1>(t), std::get<2>(t)};
}

bool index_numbers(const py::array& indices, int64_t count, std::vector<int64_t>* out) {
  const char kind = indices.dtype().kind();
  const auto item = indices.itemsize();
  if (indices.ndim() != 1 || (kind != 'i' && kind != 'u') || item > 8 ||
      indices.dtype().byteorder() == '>') {
    return false;
  }
  const int64_t n = indices.shape(0), stride = indices.strides(0);
  const auto* base = static_cast<const uint8_t*>(indices.data());
  out->resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* at = base + i * stride;
    const auto load = [at](auto zero) {
      decltype(zero) x = zero;
      std::memcpy(&x, at, sizeof(x));
      return x;
    };
    int64_t value = 0;
    if (kind == 'u') {
      uint64_t u = 0;
      switch (item) {
        case 1: u = load(uint8_t{0}); break;
        case 2: u = load(uint16_t{0}); break;
        case 4: u = load(uint32_t{0}); break;
        default: u = load(uint64_t{0}); break;
      }
      if (u >= static_cast<uint64_t>(count)) return false;
      value = static_cast<int64_t>(u);
    } else {
      switch (item) {
        case 1: value = load(int8_t{0}); break;
        case 2: value = load(int16_t{0}); break;
        case 4: value = load(int32_t{0}); break;
        default: value = load(int64_t{0}); break;
      }
      if (value < 0 || value >= count) return false;
    }
    (*out)[static_cast<size_t>(i)] = value;
  }
  return true;
}

void bind_shared(py::module_& m) {
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
  m.def("check_in_range", &check_in_range, "indices"_a, "rows"_a, "name"_a, "noun"_a,
        "table"_a = "",
        "IndexError naming the first of indices outside [0, rows), with its index, "
        "the valid range and how many are out.");
}

}  // namespace posembed::bind
