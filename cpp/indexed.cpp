#include "indexed.hpp"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <vector>

namespace posembed {

namespace {

#ifdef IOV_MAX
constexpr int kIovMax = IOV_MAX;
#else
constexpr int kIovMax = 1024;
#endif

// Writes iov[0..n) at `offset`, resuming partial writes; 0 or an errno.
int pwritev_all(int fd, std::vector<iovec>& iov, int64_t offset) {
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

}  // namespace

MarkedWriteResult write_marked(int fd, const uint8_t* data, int64_t count, int64_t item,
                               const int64_t* cuts, int64_t ncuts, const uint8_t* mark,
                               int64_t offset) {
  MarkedWriteResult result;
  std::vector<iovec> iov;
  iov.reserve(static_cast<size_t>(2 * ncuts + 1));
  // iovec's base is not const; writev only reads through it
  auto* bytes = const_cast<uint8_t*>(data);
  auto* marker = const_cast<uint8_t*>(mark);
  int64_t start = 0;
  for (int64_t i = 0; i < ncuts; ++i) {
    const int64_t cut = *static_cast<const volatile int64_t*>(cuts + i);
    if (cut < start || cut > count) {
      result.bad_cut = i;
      return result;
    }
    if (cut > start) {
      iov.push_back({bytes + start * item, static_cast<size_t>((cut - start) * item)});
    }
    iov.push_back({marker, static_cast<size_t>(item)});
    start = cut;
  }
  if (count > start) {
    iov.push_back({bytes + start * item, static_cast<size_t>((count - start) * item)});
  }
  result.errno_value = pwritev_all(fd, iov, offset);
  return result;
}

}  // namespace posembed
