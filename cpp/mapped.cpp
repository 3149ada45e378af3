// mapped: see mapped.hpp.
#include "mapped.hpp"

#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <csetjmp>
#include <csignal>
#include <cstring>
#include <mutex>
#include <system_error>

#include "fileio.hpp"

namespace posembed {

FileMap::FileMap(int fd, int64_t size) : size_(size > 0 ? size : 0) {
  if (size_ == 0) return;
  void* p = ::mmap(nullptr, static_cast<size_t>(size_), PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "mmap");
  // the kernel's own read-ahead kept: a file not yet in the page cache is
  // read in runs of pages around each miss, as for any memory-mapped reader
  base_ = static_cast<const uint8_t*>(p);
}

FileMap::~FileMap() {
  if (base_ != nullptr) ::munmap(const_cast<uint8_t*>(base_), static_cast<size_t>(size_));
}

namespace {

// The guarded copy running on this thread, or null. initial-exec: read in
// the signal handler without a call into the dynamic linker.
// volatile, with signal fences around the copy: the stores that arm and
// disarm it must not be merged or moved across the copy.
__attribute__((tls_model("initial-exec"))) thread_local sigjmp_buf* volatile t_guard = nullptr;

std::atomic<int64_t> g_faults{0};
// The handler before ours, for every other SIGBUS: read before ours is
// installed, never written after.
struct sigaction g_previous;
std::once_flag g_armed;

void on_sigbus(int sig, siginfo_t* info, void* context) {
  sigjmp_buf* guard = t_guard;
  if (guard != nullptr) {
    t_guard = nullptr;
    siglongjmp(*guard, 1);
  }
  // not ours: as the previous handler would have it
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(sig, info, context);
    return;
  }
  if (g_previous.sa_handler == SIG_IGN) return;
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != nullptr) {
    g_previous.sa_handler(sig);
    return;
  }
  // the default: die of the signal, whether it was a fault or sent
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(SIGBUS, &dfl, nullptr);
  ::raise(sig);
}

}  // namespace

// Installed once: a library that installs its own handler later (Python's
// faulthandler) passes a SIGBUS on to the one it replaced, ours; installing
// ours again over it would make the two pass a foreign SIGBUS to each other.
void arm_mapped_reads() {
  std::call_once(g_armed, [] {
    struct sigaction ours {};
    ours.sa_sigaction = &on_sigbus;
    // SA_NODEFER: the jump out of the handler leaves SIGBUS unblocked
    ours.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&ours.sa_mask);
    if (::sigaction(SIGBUS, nullptr, &g_previous) == 0) ::sigaction(SIGBUS, &ours, nullptr);
  });
}

bool guarded_copy(uint8_t* to, const uint8_t* from, int64_t n) {
  if (n <= 0) return true;
  sigjmp_buf here;
  // 0: no signal mask saved or restored (no system call per copy)
  if (sigsetjmp(here, 0) != 0) {  // t_guard was cleared by the handler
    g_faults.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  t_guard = &here;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  std::memcpy(to, from, static_cast<size_t>(n));
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_guard = nullptr;
  return true;
}

int64_t mapped_faults() { return g_faults.load(std::memory_order_relaxed); }

int read_mapped(int fd, const uint8_t* map, int64_t map_size, uint8_t* to, int64_t n,
                int64_t offset, int64_t* ended) {
  if (map != nullptr && offset >= 0 && n >= 0 && offset <= map_size - n &&
      guarded_copy(to, map + offset, n)) {
    return 0;
  }
  return pread_all(fd, to, n, offset, ended);
}

}  // namespace posembed
