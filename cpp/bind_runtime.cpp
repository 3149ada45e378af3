// Bindings of the runtime: thread count, the build's facts (config), and the
// renames that replace an output folder atomically.
#include <cerrno>
#include <string>

#if defined(__linux__)
#include <fcntl.h>  // AT_FDCWD
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "bind.hpp"
#include "random.hpp"
#include "runtime.hpp"
#include "simd.hpp"

#ifndef POSEMBED_SANITIZED
#define POSEMBED_SANITIZED 0  // 1 in a POSEMBED_SANITIZE build (ASan + UBSan)
#endif

namespace posembed::bind {
namespace {

using namespace pybind11::literals;

// Every level this CPU can run, lowest first.
py::list simd_levels() {
  py::list levels;
  const int best = static_cast<int>(cpu_simd_level());
  for (int l = 0; l <= best; ++l) levels.append(simd_level_name(static_cast<SimdLevel>(l)));
  return levels;
}

py::dict config() {
  return py::dict("compiler"_a = POSEMBED_COMPILER, "build_type"_a = POSEMBED_BUILD_TYPE,
                  "sanitized"_a = POSEMBED_SANITIZED != 0, "openmp"_a = openmp_enabled(),
                  "openmp_version"_a = openmp_version(),
                  "simd"_a = simd_level_name(simd_level()),
                  "cpu_simd"_a = simd_level_name(cpu_simd_level()),
                  "simd_levels"_a = simd_levels(), "dropout_rng"_a = random_bits_impl(),
                  "num_threads"_a = get_num_threads(),
                  "default_num_threads"_a = default_num_threads(),
                  "num_threads_set"_a = num_threads_set(), "max_num_threads"_a = max_num_threads(),
                  "forked_child"_a = forked_child(), "parallel_min_bytes"_a = parallel_min_bytes(),
                  "stream_min_bytes"_a = stream_min_bytes());
}

// renameat2(2)'s flags, spelled out: older C libraries lack both them and the
// renameat2 wrapper, but any Linux since 3.15 has the system call.
constexpr unsigned rename_noreplace_flag = 1U << 0;
constexpr unsigned rename_exchange_flag = 1U << 1;

// renameat2(from, to, flags) as an errno (0: done). Python's os module can
// neither swap two paths nor rename without replacing; ENOSYS where the
// system has no renameat2, EINVAL where the file system lacks the flag.
int rename2(const std::string& from, const std::string& to, unsigned flags) {
  // A path with a NUL would be cut there by the C call: another path.
  if (from.find('\0') != std::string::npos || to.find('\0') != std::string::npos) {
    throw py::value_error("embedded null byte in a path");
  }
#if defined(__linux__) && defined(SYS_renameat2)
  int error = 0;
  {
    py::gil_scoped_release release;  // a rename on a network file system can block
    if (syscall(SYS_renameat2, AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), flags) != 0) {
      error = errno;
    }
  }
  return error;
#else
  (void)flags;
  return ENOSYS;
#endif
}

int rename_exchange(const py::bytes& a, const py::bytes& b) {
  return rename2(a, b, rename_exchange_flag);
}

int rename_noreplace(const py::bytes& from, const py::bytes& to) {
  return rename2(from, to, rename_noreplace_flag);
}

}  // namespace

void bind_runtime(py::module_& m) {
  m.def("set_num_threads", &set_num_threads, "threads"_a);
  m.def("get_num_threads", &get_num_threads);
  m.def("set_calling_thread_threads", &set_calling_thread_threads, "threads"_a);
  m.def("calling_thread_threads", &calling_thread_threads);
  m.def("config", &config);
  m.def("rename_exchange", &rename_exchange, "a"_a, "b"_a,
        "Swap the paths a and b (bytes, os.fsencode) atomically; 0 or the errno.");
  m.def("rename_noreplace", &rename_noreplace, "src"_a, "dst"_a,
        "Rename src to dst (bytes) unless dst exists; 0 or the errno (EEXIST).");
}

}  // namespace posembed::bind
