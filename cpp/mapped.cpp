// mapped: see mapped.hpp.
#include "mapped.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csetjmp>
#include <csignal>
#include <cstring>
#include <exception>
#include <future>
#include <mutex>
#include <system_error>
#include <thread>

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

namespace {

// The locks a read of a file takes (each StableFile's kept file, the
// probe's request) are held across fork(): readers on threads of their own
// may hold one at any moment, and a child that inherited it locked would
// wait for it forever (a data loader's worker forked while batches are read
// ahead in the parent).
std::mutex g_kept_lock;  // every StableFile's kept_
std::mutex g_probe_lock;
[[maybe_unused]] const int g_fork_guard = pthread_atfork(
    [] {
      g_kept_lock.lock();
      g_probe_lock.lock();
    },
    [] {
      g_probe_lock.unlock();
      g_kept_lock.unlock();
    },
    [] {
      g_probe_lock.unlock();
      g_kept_lock.unlock();
    });

std::atomic<bool> g_probe_armed{false};  // a truncate probe is asked for
std::string g_truncate_path;             // guarded by g_probe_lock; empty: none asked for
int64_t g_truncate_size = 0;

void run_truncate_probe(const std::string& path) {
  if (!g_probe_armed.load(std::memory_order_acquire)) return;
  const std::lock_guard<std::mutex> hold(g_probe_lock);
  if (g_truncate_path.empty() || g_truncate_path != path) return;
  g_truncate_path.clear();
  g_probe_armed.store(false, std::memory_order_release);
  if (::truncate(path.c_str(), static_cast<off_t>(g_truncate_size)) != 0) return;
}

FileStatus judge(const struct stat& st, const FileStamp& stamp) {
  FileStatus status;
  if (!S_ISREG(st.st_mode)) {
    status.kind = FileStatus::not_regular;
  } else if (stamp.given && st.st_size != stamp.size) {
    status.kind = FileStatus::resized;
    status.size = st.st_size;
  } else if (stamp.given && (static_cast<int64_t>(st.st_ino) != stamp.inode ||
                             st.st_mtim.tv_sec * int64_t{1000000000} + st.st_mtim.tv_nsec !=
                                 stamp.mtime_ns)) {
    status.kind = FileStatus::replaced;
  }
  return status;
}

}  // namespace

OpenFile::OpenFile(int fd, const int64_t identity[4]) : fd_(fd) {
  std::copy(identity, identity + 4, identity_);
  if (identity[2] <= 0) return;
  try {
    map_ = std::make_unique<const FileMap>(fd, identity[2]);
  } catch (const std::exception&) {
    map_.reset();  // read with positional reads
  }
}

OpenFile::~OpenFile() { ::close(fd_); }

bool OpenFile::same(const int64_t identity[4]) const {
  return std::equal(identity, identity + 4, identity_);
}

namespace {

void identity_of(const struct stat& st, int64_t identity[4]) {
  identity[0] = static_cast<int64_t>(st.st_dev);
  identity[1] = static_cast<int64_t>(st.st_ino);
  identity[2] = static_cast<int64_t>(st.st_size);
  identity[3] = st.st_mtim.tv_sec * int64_t{1000000000} + st.st_mtim.tv_nsec;
}

FileStatus unreadable(int err) {
  FileStatus status;
  status.kind = FileStatus::unreadable;
  status.err = err;
  return status;
}

}  // namespace

FileStatus StableFile::open(std::shared_ptr<const OpenFile>* file) {
  file->reset();
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) return unreadable(errno);
  FileStatus status = judge(st, stamp_);
  if (status.kind != FileStatus::ok) return status;
  int64_t identity[4];
  identity_of(st, identity);
  {
    const std::lock_guard<std::mutex> hold(g_kept_lock);
    if (kept_ != nullptr && kept_->same(identity)) *file = kept_;
  }
  if (*file == nullptr) {
    // O_NONBLOCK: a FIFO put in the file's place since is refused, never waited on
    int opened = -1;
    do {
      opened = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    } while (opened < 0 && errno == EINTR);
    if (opened < 0) return unreadable(errno);
    if (::fstat(opened, &st) != 0) {
      const int err = errno;
      ::close(opened);
      return unreadable(err);
    }
    status = judge(st, stamp_);  // the file opened, which may have changed since the lookup
    if (status.kind != FileStatus::ok) {
      ::close(opened);
      return status;
    }
    identity_of(st, identity);
    auto opened_file = std::make_shared<const OpenFile>(opened, identity);
    const std::lock_guard<std::mutex> hold(g_kept_lock);
    kept_ = opened_file;
    *file = std::move(opened_file);  // kept by this call while another replaces it
  }
  run_truncate_probe(path_);
  return status;
}

void truncate_after_open(const std::string& path, int64_t size) {
  const std::lock_guard<std::mutex> hold(g_probe_lock);
  g_truncate_path = path;
  g_truncate_size = size;
  g_probe_armed.store(true, std::memory_order_release);
}

void hold_file_lock(double seconds) {
  std::promise<void> held;
  std::future<void> taken = held.get_future();
  std::thread([seconds, held = std::move(held)]() mutable {
    const std::lock_guard<std::mutex> hold(g_kept_lock);
    held.set_value();
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  }).detach();
  taken.wait();
}

void set_file(const OpenFile& file, int* fd, const uint8_t** map, int64_t* map_size) {
  *fd = file.fd();
  *map = nullptr;
  *map_size = 0;
  if (file.map() != nullptr && file.map()->size() > 0) {
    arm_mapped_reads();
    *map = file.map()->data();
    *map_size = file.map()->size();
  }
}

FileStatus StableFile::check(const OpenFile& file) const {
  struct stat st {};
  if (::fstat(file.fd(), &st) != 0) return unreadable(errno);
  return judge(st, stamp_);
}

}  // namespace posembed
