// Positional file I/O that the file kernels share: whole reads and writes,
// partial transfers resumed and EINTR retried, errors returned (never
// thrown: the callers run on OpenMP threads with the GIL released).
#pragma once

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <vector>

namespace posembed {

#ifdef IOV_MAX
constexpr int kIovMax = IOV_MAX;
#else
constexpr int kIovMax = 1024;
#endif

// Writes iov[0..n) at `offset`, resuming partial writes; 0 or an errno.
inline int pwritev_all(int fd, std::vector<iovec>& iov, int64_t offset) {
  size_t first = 0;
  while (first < iov.size()) {
    const int batch = static_cast<int>(std::min<size_t>(iov.size() - first, kIovMax));
    const ssize_t done = ::pwritev(fd, iov.data() + first, batch, static_cast<off_t>(offset));
    if (done < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (done == 0) return EIO;  // a regular file that takes nothing would loop forever
    offset += done;
    auto left = static_cast<size_t>(done);
    while (first < iov.size() && left >= iov[first].iov_len) {
      left -= iov[first].iov_len;
      ++first;
    }
    if (left > 0) {  // inside iov[first]: the rest of it next
      iov[first].iov_base = static_cast<uint8_t*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
  return 0;
}

// Writes n bytes from `from` at `offset`; 0 or an errno.
inline int pwrite_all(int fd, const uint8_t* from, int64_t n, int64_t offset) {
  // iovec's base is not const; the write only reads through it
  std::vector<iovec> iov{{const_cast<uint8_t*>(from), static_cast<size_t>(n)}};
  return n > 0 ? pwritev_all(fd, iov, offset) : 0;
}

// Reads n bytes at `offset` into `to`, resuming partial reads: 0, an errno,
// or -1 when the file ended first (`*ended` then holds the byte).
inline int pread_all(int fd, uint8_t* to, int64_t n, int64_t offset, int64_t* ended) {
  int64_t got = 0;
  while (got < n) {
    const ssize_t r =
        ::pread(fd, to + got, static_cast<size_t>(n - got), static_cast<off_t>(offset + got));
    if (r < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (r == 0) {
      *ended = offset + got;
      return -1;
    }
    got += r;
  }
  return 0;
}

// Reverses the bytes of each of n items of `itemsize` bytes (1, 2, 4 or 8).
inline void byteswap_items(uint8_t* p, int64_t n, int64_t itemsize) {
  if (itemsize == 2) {
    for (int64_t i = 0; i < n; ++i) std::swap(p[2 * i], p[2 * i + 1]);
  } else if (itemsize == 4 || itemsize == 8) {
    for (int64_t i = 0; i < n; ++i) std::reverse(p + i * itemsize, p + (i + 1) * itemsize);
  }
}

}  // namespace posembed
