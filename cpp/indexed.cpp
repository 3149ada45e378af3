#include "indexed.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "fileio.hpp"
#include "parallel.hpp"
#include "runtime.hpp"

namespace posembed {

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

namespace {

template <class T>
struct Tag {
  using type = T;
};

// Calls f(Tag<T>) for the C++ type of `kind`.
template <class F>
auto with_kind(IntKind kind, F&& f) {
  switch (kind) {
    case IntKind::i8: return f(Tag<int8_t>{});
    case IntKind::i16: return f(Tag<int16_t>{});
    case IntKind::i32: return f(Tag<int32_t>{});
    case IntKind::i64: return f(Tag<int64_t>{});
    case IntKind::u8: return f(Tag<uint8_t>{});
    case IntKind::u16: return f(Tag<uint16_t>{});
    case IntKind::u32: return f(Tag<uint32_t>{});
    case IntKind::u64: break;
  }
  return f(Tag<uint64_t>{});
}

int64_t size_of(IntKind kind) {
  return with_kind(kind, [](auto tag) {
    return static_cast<int64_t>(sizeof(typename decltype(tag)::type));
  });
}

// Whether every id of p[0..n) lies in [low, high]: one pass for the
// smallest and the largest (it vectorises).
template <class T>
bool ids_within(const T* p, int64_t n, int64_t low, uint64_t high) {
  if (n == 0) return true;
  if constexpr (std::is_same_v<T, uint16_t>) {
    // as int16 with the top bit flipped (the order kept): SSE2, the build's
    // baseline, has 16-bit min and max for signed values only
    int16_t lo = INT16_MAX, hi = INT16_MIN;
    for (int64_t i = 0; i < n; ++i) {
      const auto v = static_cast<int16_t>(p[i] ^ 0x8000u);
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    const auto least = static_cast<uint16_t>(static_cast<uint16_t>(lo) ^ 0x8000u);
    const auto most = static_cast<uint16_t>(static_cast<uint16_t>(hi) ^ 0x8000u);
    return (low <= 0 || least >= low) && most <= high;
  }
  T lo = p[0], hi = p[0];
  for (int64_t i = 1; i < n; ++i) {
    lo = std::min(lo, p[i]);
    hi = std::max(hi, p[i]);
  }
  if constexpr (std::is_signed_v<T>) {
    if (static_cast<int64_t>(lo) < low) return false;
    return hi < 0 || static_cast<uint64_t>(static_cast<int64_t>(hi)) <= high;
  } else {
    return (low <= 0 || static_cast<uint64_t>(lo) >= static_cast<uint64_t>(low)) &&
           static_cast<uint64_t>(hi) <= high;
  }
}

void keep_min(std::atomic<int64_t>& slot, int64_t v) {
  int64_t cur = slot.load(std::memory_order_relaxed);
  while ((cur < 0 || v < cur) && !slot.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

}  // namespace

CopyMarkedResult copy_marked(int in_fd, int64_t in_offset, IntKind in, bool swap, int64_t first,
                             int64_t last, int64_t block, const int64_t* cuts, int64_t ncuts,
                             int out_fd, IntKind out, const uint8_t* mark, int64_t out_offset,
                             int64_t low, uint64_t high, int threads) {
  CopyMarkedResult result;
  if (last <= first) return result;
  // the cuts are read once, into a copy checked before any write
  std::vector<int64_t> at(static_cast<size_t>(ncuts));
  for (int64_t i = 0; i < ncuts; ++i) {
    const int64_t c = *static_cast<const volatile int64_t*>(cuts + i);
    if (c <= first || c > last || (i > 0 && c <= at[static_cast<size_t>(i - 1)])) {
      result.bad_cuts = true;
      return result;
    }
    at[static_cast<size_t>(i)] = c;
  }
  block = std::max<int64_t>(1, block);
  const int64_t in_size = size_of(in), out_size = size_of(out);
  const int64_t blocks = (last - first + block - 1) / block;
  const auto team = static_cast<size_t>(std::max(1, threads));
  std::vector<std::unique_ptr<uint8_t[]>> inbuf(team), outbuf(team);
  std::atomic<int64_t> stopped{-1}, ended{-1};
  std::atomic<int> failed{0};
  parallel_for(blocks, threads, [&](int64_t b0, int64_t b1, int tid) {
    const auto t = static_cast<size_t>(tid);
    if (!inbuf[t]) {
      inbuf[t].reset(new uint8_t[static_cast<size_t>(block * in_size)]);
      // a block and its marks (one a token at most)
      outbuf[t].reset(new uint8_t[static_cast<size_t>(2 * block * out_size)]);
    }
    for (int64_t k = b0; k < b1; ++k) {
      if (failed.load(std::memory_order_relaxed) != 0 ||
          ended.load(std::memory_order_relaxed) >= 0) {
        return;
      }
      const int64_t a = first + k * block, b = std::min(last, a + block), n = b - a;
      int64_t end_byte = -1;
      const int r =
          pread_all(in_fd, inbuf[t].get(), n * in_size, in_offset + a * in_size, &end_byte);
      if (r == -1) {
        keep_min(ended, end_byte);
        return;
      }
      if (r != 0) {
        int none = 0;
        failed.compare_exchange_strong(none, r);
        return;
      }
      if (swap) byteswap_items(inbuf[t].get(), n, in_size);
      const bool fits = with_kind(in, [&](auto tag) {
        using T = typename decltype(tag)::type;
        auto* p = reinterpret_cast<T*>(inbuf[t].get());
        return ids_within(p, n, low, high);
      });
      if (!fits) {
        keep_min(stopped, k);
        continue;
      }
      // this block's marks: the cuts in (a, b]; the ones before it shift it
      const auto lo = std::upper_bound(at.begin(), at.end(), a);
      const auto hi = std::upper_bound(lo, at.end(), b);
      const int64_t before = lo - at.begin();
      // the block's output assembled in cache (converted, marks in place):
      // one write of one piece, however many documents end in it
      uint8_t* const dst = outbuf[t].get();
      with_kind(in, [&](auto tin) {
        using T = typename decltype(tin)::type;
        with_kind(out, [&](auto tout) {
          using U = typename decltype(tout)::type;
          const auto* p = reinterpret_cast<const T*>(inbuf[t].get());
          auto* q = reinterpret_cast<U*>(dst);
          U m;
          std::memcpy(&m, mark, sizeof(U));
          int64_t from = 0;
          for (auto c = lo;; ++c) {
            const int64_t to = c == hi ? n : *c - a;
            if constexpr (std::is_same_v<T, U>) {
              std::memcpy(q, p + from, static_cast<size_t>(to - from) * sizeof(U));
            } else {
              for (int64_t i = from; i < to; ++i) q[i - from] = static_cast<U>(p[i]);
            }
            q += to - from;
            from = to;
            if (c == hi) break;
            *q++ = m;
          }
        });
      });
      const int64_t items = n + (hi - lo);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
      byteswap_items(dst, items, out_size);  // the format is little-endian
#endif
      const int w =
          pwrite_all(out_fd, dst, items * out_size, out_offset + (a - first + before) * out_size);
      if (w != 0) {
        int none = 0;
        failed.compare_exchange_strong(none, w);
        return;
      }
    }
  });
  result.errno_value = failed.load();
  result.short_at = ended.load();
  result.stopped = stopped.load();
  return result;
}

}  // namespace posembed
