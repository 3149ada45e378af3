// posembed._core._probes: what the benchmark and the tests measure the
// kernels against (memory rooflines, an ALU loop) and how they look inside
// the thread pool. Not part of the API.
#include <algorithm>
#include <atomic>

#include "bind.hpp"
#include "mapped.hpp"
#include "parallel.hpp"
#include "roofline.hpp"
#include "rowops.hpp"
#include "runtime.hpp"
#include "samples.hpp"

namespace posembed::bind {
namespace {

using namespace pybind11::literals;

char* writeable_bytes(py::array& a, const char* name) {
  if (!c_contiguous(a) || !a.writeable()) {
    throw py::value_error(std::string(name) + " must be a writeable C-contiguous array");
  }
  return static_cast<char*>(a.mutable_data());
}

int threads_or_all(int threads) { return threads > 0 ? threads : get_num_threads(); }

void roofline_fill(py::array buf, int value, bool stream, int threads) {
  char* dst = writeable_bytes(buf, "buf");
  const auto n = static_cast<int64_t>(buf.nbytes());
  py::gil_scoped_release nogil;
  posembed::roofline_fill(dst, n, static_cast<unsigned char>(value), threads_or_all(threads),
                          stream);
}

// A block of `size` bytes from the cache the kernels' outputs come from
// (the very memory a kernel that just returned a block of that size wrote),
// filled as roofline_fill fills, then handed back to the cache.
void roofline_fill_block(int64_t size, int value, bool stream, int threads) {
  if (size <= 0) throw py::value_error("size must be > 0");
  const py::capsule block = output_block(size);
  auto* data = static_cast<char*>(static_cast<OutputBlock*>(block.get_pointer())->data);
  py::gil_scoped_release nogil;
  posembed::roofline_fill(data, size, static_cast<unsigned char>(value), threads_or_all(threads),
                          stream);
}

uint64_t roofline_spin(int64_t n, int threads) {
  if (n < 0) throw py::value_error("n must be >= 0");
  py::gil_scoped_release nogil;
  return posembed::roofline_spin(n, threads_or_all(threads));
}

double roofline_flops(int64_t n, bool fused, int threads) {
  if (n < 0) throw py::value_error("n must be >= 0");
  py::gil_scoped_release nogil;
  return posembed::roofline_flops(n, threads_or_all(threads), fused);
}

uint64_t roofline_random_bits(int64_t n, int threads) {
  if (n < 0) throw py::value_error("n must be >= 0");
  py::gil_scoped_release nogil;
  return posembed::roofline_random_bits(n, threads_or_all(threads));
}

// Ranges (byte offset, length) of the file `fd` read into dst back to back,
// with pread, or copied out of `mapping` (a FileMap of that file) where given.
void roofline_pread(int fd, const I64& ranges, py::array dst, int threads,
                    const py::object& mapping) {
  char* d = writeable_bytes(dst, "dst");
  if (ranges.ndim() != 2 || ranges.shape(1) != 2) throw py::value_error("ranges: (n, 2)");
  const auto n = static_cast<int64_t>(ranges.shape(0));
  int64_t total = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (ranges.data()[2 * i] < 0 || ranges.data()[2 * i + 1] < 0) {
      throw py::value_error("ranges must be >= 0");
    }
    total += ranges.data()[2 * i + 1];
  }
  if (total > static_cast<int64_t>(dst.nbytes())) throw py::value_error("dst is too small");
  const auto [map, map_size] = mapped_view(mapping);
  int err = 0;
  {
    py::gil_scoped_release nogil;
    if (map != nullptr) {
      err = posembed::roofline_mapped(map, map_size, ranges.data(), n, d, threads_or_all(threads));
    } else {
      err = posembed::roofline_pread(fd, ranges.data(), n, d, threads_or_all(threads));
    }
  }
  if (err != 0) throw py::value_error("roofline_pread: the file could not be read whole");
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
      parallel_for(
          n, get_num_threads(),
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

// NumPy's random_interval(max) for each of `maxes`, drawn in turn from the
// MT19937 state (key, pos), as the samples kernels' shuffles draw them.
py::array legacy_intervals(const py::array_t<uint32_t, py::array::c_style>& key, int pos,
                           const py::array_t<uint64_t, py::array::c_style>& maxes) {
  if (key.ndim() != 1 || key.size() != 624 || pos < 0 || pos > 624 || maxes.ndim() != 1) {
    throw py::value_error("legacy_intervals: not an MT19937 state and a 1-D array of maxima");
  }
  LegacyState state{};
  std::copy(key.data(), key.data() + 624, state.key);
  state.pos = pos;
  py::array_t<uint64_t> out(maxes.size());
  for (py::ssize_t i = 0; i < maxes.size(); ++i) {
    out.mutable_data()[i] = legacy_interval(state, maxes.data()[i]);
  }
  return out;
}

}  // namespace

void bind_probes(py::module_& m) {
  m.def("legacy_intervals", &legacy_intervals, "key"_a, "pos"_a, "maxes"_a,
        "NumPy's random_interval of each maximum, drawn from an MT19937 state in turn.");
  m.def("set_thresholds", &set_thresholds, "parallel_min_bytes"_a, "stream_min_bytes"_a,
        "Override the work thresholds (-1 restores a default).");
  m.def("last_team_size", &last_team_size,
        "Threads that ran the most recent parallel section (1 if it stayed serial).");
  m.def("calls_in_flight_peak", &calls_in_flight_peak, "reset"_a = false,
        "Most kernel calls in flight at once since the last reset.");
  m.def("helpers_busy_peak", &helpers_busy_peak, "reset"_a = false,
        "Most helper threads busy at once across calls since the last reset.");
  m.def("team_sizes_in_openmp_team", &team_sizes_in_openmp_team, "outer"_a, "n"_a,
        "Largest team a call made from each thread of an OpenMP team used.");
  m.def("roofline_fill", &roofline_fill, "buf"_a, "value"_a = 0, "stream"_a = false,
        "threads"_a = 0);
  m.def("roofline_fill_block", &roofline_fill_block, "size"_a, "value"_a = 0, "stream"_a = false,
        "threads"_a = 0,
        "A block of size bytes from the kernels' output cache filled with value, then "
        "handed back.");
  m.def("output_block_size", &output_block_size, "base"_a,
        "The size of the kernels' output block behind an array's .base, or -1 where there "
        "is none.");
  m.def("roofline_spin", &roofline_spin, "n"_a, "threads"_a = 0);
  m.def("roofline_flops", &roofline_flops, "n"_a, "fused"_a = false, "threads"_a = 0,
        "n steps of the compute roofline's loop (float multiplies and adds, or FMAs) on "
        "the SIMD level in use.");
  m.def("flops_per_step", &posembed::flops_per_step, "fused"_a = false,
        "Float operations one step of roofline_flops does (an FMA is two).");
  m.def("roofline_random_bits", &roofline_random_bits, "n"_a, "threads"_a = 0,
        "The random bits of n dropout elements, drawn as the dropout kernels draw them "
        "(AES rounds at the level in use) into a buffer that stays in cache.");
  m.def("roofline_pread", &roofline_pread, "fd"_a, "ranges"_a, "dst"_a, "threads"_a = 0,
        "mapping"_a = py::none());
  m.def("mapped_faults", &posembed::mapped_faults);
  m.def("kept_output_blocks", [] {
          py::list sizes;
          for (const int64_t size : kept_output_blocks()) sizes.append(size);
          return sizes;
        },
        "The sizes in bytes of the freed output blocks kept for reuse, oldest first.");
  m.def("truncate_after_open", &posembed::truncate_after_open, "path"_a, "size"_a,
        "The next open of `path` by a kernel that reads it on each call truncates it to `size` "
        "bytes after its checks (a file that shrinks while it is read).");
  m.def("hold_file_lock", &posembed::hold_file_lock, "seconds"_a,
        "A thread of its own holds the lock a kernel takes to look at the file it keeps open, "
        "for `seconds` (returns once it holds it).");
  m.def("roofline_copy", &roofline_copy, "dst"_a, "src"_a, "stream"_a = false, "threads"_a = 0);
}

}  // namespace posembed::bind
