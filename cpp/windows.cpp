#include "windows.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "copy.hpp"
#include "fileio.hpp"
#include "parallel.hpp"
#include "rowops.hpp"
#include "runtime.hpp"

namespace posembed {

int64_t window_count(int64_t n, int64_t size, int64_t step, Tail tail) {
  if (n <= 0) return 0;
  if (tail == Tail::drop) return n < size ? 0 : (n - size) / step + 1;
  return n <= size ? 1 : (n - size + step - 1) / step + 1;
}

int64_t window_start(int64_t k, int64_t count, int64_t n, int64_t size, int64_t step, Tail tail) {
  if (tail == Tail::shift && k == count - 1 && n >= size) return n - size;
  return k * step;
}

void window_offsets(const int64_t* doc_offsets, int64_t ndocs, int64_t size, int64_t step,
                    Tail tail, int64_t* win_offsets) {
  win_offsets[0] = 0;
  for (int64_t k = 0; k < ndocs; ++k) {
    const int64_t n = doc_offsets[k + 1] - doc_offsets[k];
    win_offsets[k + 1] = win_offsets[k] + window_count(n, size, step, tail);
  }
}

void window_layout(const int64_t* doc_offsets, const int64_t* win_offsets, int64_t ndocs,
                   int64_t doc_base, int64_t size, int64_t step, Tail tail, int64_t begin,
                   int64_t end, const Layout& out) {
  const int64_t count = end - begin;
  // Each thread takes a range of windows and walks the documents they belong to.
  parallel_for(count, threads_for_bytes(count * 3 * 8), [&](int64_t lo, int64_t hi, int) {
    if (lo >= hi) return;
    int64_t doc =
        std::upper_bound(win_offsets, win_offsets + ndocs + 1, begin + lo) - win_offsets - 1;
    for (int64_t i = lo; i < hi; ++i) {
      const int64_t w = begin + i;
      while (win_offsets[doc + 1] <= w) ++doc;
      const int64_t n = doc_offsets[doc + 1] - doc_offsets[doc];
      const int64_t windows = win_offsets[doc + 1] - win_offsets[doc];
      const int64_t start = window_start(w - win_offsets[doc], windows, n, size, step, tail);
      out.starts[i] = start;
      out.lengths[i] = std::min(size, n - start);
      out.documents[i] = doc_base + doc;
    }
  });
}

namespace {

void fill_pad(char* dst, const char* pad, int64_t itemsize, int64_t count) {
  switch (itemsize) {
    case 2: {
      uint16_t v;
      std::memcpy(&v, pad, 2);
      for (int64_t i = 0; i < count; ++i) std::memcpy(dst + 2 * i, &v, 2);
      return;
    }
    case 4: {
      uint32_t v;
      std::memcpy(&v, pad, 4);
      for (int64_t i = 0; i < count; ++i) std::memcpy(dst + 4 * i, &v, 4);
      return;
    }
    case 8: {
      uint64_t v;
      std::memcpy(&v, pad, 8);
      for (int64_t i = 0; i < count; ++i) std::memcpy(dst + 8 * i, &v, 8);
      return;
    }
    default:
      for (int64_t i = 0; i < count; ++i) {
        std::memcpy(dst + itemsize * i, pad, static_cast<size_t>(itemsize));
      }
  }
}

}  // namespace

int64_t first_misplaced_window(const TokenSpan& tokens, const int64_t* doc_offsets, int64_t ndocs,
                               const ConstLayout& layout, int64_t size) {
  std::atomic<int64_t> first_bad{-1};
  parallel_for(layout.count, threads_for_bytes(layout.count * 3 * 8),
               [&](int64_t begin, int64_t end, int) {
                 for (int64_t w = begin; w < end; ++w) {
                   const int64_t doc = layout.documents[w];
                   const int64_t start = layout.starts[w];
                   const int64_t len = layout.lengths[w];
                   bool ok = doc >= 0 && doc < ndocs && start >= 0 && len >= 0 && len <= size;
                   if (ok) {
                     const int64_t lo = doc_offsets[doc];
                     const int64_t hi = doc_offsets[doc + 1];
                     // each step keeps every difference inside int64
                     ok = lo >= 0 && hi >= lo && start <= hi - lo && len <= hi - lo - start;
                     if (ok) {
                       const int64_t at = lo + start;  // in the corpus
                       ok = at >= tokens.first && at - tokens.first <= tokens.count - len;
                     }
                   }
                   if (!ok) {
                     int64_t seen = first_bad.load();
                     while ((seen < 0 || w < seen) && !first_bad.compare_exchange_weak(seen, w)) {
                     }
                     return;  // later windows of this range cannot come first
                   }
                 }
               });
  return first_bad.load();
}

void fill_windows(const TokenSpan& tokens, const int64_t* doc_offsets, const ConstLayout& layout,
                  int64_t size, const char* pad, char* rows, bool stream) {
  const int64_t itemsize = tokens.itemsize;
  const int64_t row_bytes = size * itemsize;
  parallel_for(layout.count, threads_for_bytes(layout.count * row_bytes),
               [&](int64_t begin, int64_t end, int) {
                 for (int64_t w = begin; w < end; ++w) {
                   const int64_t len = layout.lengths[w];
                   const int64_t at =
                       doc_offsets[layout.documents[w]] + layout.starts[w] - tokens.first;
                   char* dst = rows + w * row_bytes;
                   const char* src = tokens.data + at * itemsize;
                   // streamed: whole lines only, so the padding's line is never
                   // written by both kinds of store
                   if (stream) {
                     copy_stream(dst, src, len * itemsize);
                   } else {
                     std::memcpy(dst, src, static_cast<size_t>(len * itemsize));
                   }
                   fill_pad(dst + len * itemsize, pad, itemsize, size - len);
                 }
                 if (stream) stream_fence();
               });
}

// Row bytes a thread of fill_windows_to_file cuts and writes at a time.
constexpr int64_t kFileBlockBytes = int64_t{1} << 18;

FileCutResult fill_windows_to_file(int in_fd, int64_t in_offset, int64_t itemsize, bool swap,
                                   const int64_t* doc_offsets, const ConstLayout& layout,
                                   int64_t size, const char* pad, int out_fd, int64_t out_offset,
                                   int64_t block_bytes, int threads) {
  FileCutResult result;
  const int64_t row_bytes = size * itemsize;
  const int64_t rows = std::max<int64_t>(1, block_bytes / row_bytes);
  // tokens read for one write: the rows' own and up to as many again between
  // them (tails a dropping layout leaves out); windows further apart go in
  // separate reads
  const int64_t cap = 2 * rows * size;
  const int64_t blocks = (layout.count + rows - 1) / rows;
  const auto team = static_cast<size_t>(std::max(1, threads));
  std::vector<std::unique_ptr<uint8_t[]>> tokbuf(team), rowbuf(team);
  std::atomic<int64_t> ended{-1};
  std::atomic<int> failed{0};
  auto begin_of = [&](int64_t w) { return doc_offsets[layout.documents[w]] + layout.starts[w]; };
  parallel_for(blocks, threads, [&](int64_t b0, int64_t b1, int tid) {
    const auto t = static_cast<size_t>(tid);
    if (!tokbuf[t]) {
      tokbuf[t].reset(new uint8_t[static_cast<size_t>(cap * itemsize)]);
      rowbuf[t].reset(new uint8_t[static_cast<size_t>(rows * row_bytes)]);
    }
    uint8_t* const tok = tokbuf[t].get();
    char* const out = reinterpret_cast<char*>(rowbuf[t].get());
    for (int64_t w = b0 * rows, w_end = std::min(layout.count, b1 * rows); w < w_end;) {
      if (failed.load(std::memory_order_relaxed) != 0 ||
          ended.load(std::memory_order_relaxed) >= 0) {
        return;
      }
      const int64_t block_end = std::min(w_end, (w / rows + 1) * rows);
      int64_t lo = begin_of(w), hi = lo + layout.lengths[w], j = w + 1;
      for (; j < block_end; ++j) {
        const int64_t b = begin_of(j);
        const int64_t nlo = std::min(lo, b), nhi = std::max(hi, b + layout.lengths[j]);
        if (nhi - nlo > cap) break;
        lo = nlo;
        hi = nhi;
      }
      int64_t end_byte = -1;
      const int r = pread_all(in_fd, tok, (hi - lo) * itemsize, in_offset + lo * itemsize,
                              &end_byte);
      if (r != 0) {
        if (r == -1) {
          int64_t seen = ended.load();
          while ((seen < 0 || end_byte < seen) && !ended.compare_exchange_weak(seen, end_byte)) {
          }
        } else {
          int none = 0;
          failed.compare_exchange_strong(none, r);
        }
        return;
      }
      if (swap) byteswap_items(tok, hi - lo, itemsize);
      for (int64_t k = w; k < j; ++k) {
        char* dst = out + (k - w) * row_bytes;
        const int64_t len = layout.lengths[k];
        std::memcpy(dst, tok + (begin_of(k) - lo) * itemsize, static_cast<size_t>(len * itemsize));
        fill_pad(dst + len * itemsize, pad, itemsize, size - len);
      }
      const int e = pwrite_all(out_fd, reinterpret_cast<const uint8_t*>(out), (j - w) * row_bytes,
                               out_offset + w * row_bytes);
      if (e != 0) {
        int none = 0;
        failed.compare_exchange_strong(none, e);
        return;
      }
      w = j;
    }
  });
  result.errno_value = failed.load();
  result.short_at = ended.load();
  return result;
}

namespace {

// 100 * min(left, right) + length: BERT's score, in integers.
inline int64_t center_score(int64_t p, int64_t start, int64_t len) {
  return 100 * std::min(p - start, start + len - 1 - p) + len;
}

// The layouts windows() makes: starts strictly rising, every window of one
// length but the last, which may be shorter.
inline bool regular_layout(const int64_t* starts, const int64_t* lengths, int64_t w0,
                           int64_t w1) {
  for (int64_t w = w0 + 1; w < w1; ++w) {
    if (starts[w] <= starts[w - 1]) return false;
    if (w + 1 < w1 ? lengths[w] != lengths[w0] : lengths[w] > lengths[w0]) return false;
  }
  return true;
}

// A sliding-window maximum over window indices pushed in increasing order:
// the front is the best index, the earliest of equals (a later index evicts
// only strictly worse ones). `buf` holds as many indices as will be pushed.
struct MaxDeque {
  int64_t* buf;
  int64_t head = 0;
  int64_t tail = 0;

  bool empty() const { return head == tail; }
  int64_t front() const { return buf[head]; }
  template <class Score>
  void push(int64_t w, const Score& score) {
    const int64_t s = score(w);
    while (tail > head && score(buf[tail - 1]) < s) --tail;
    buf[tail++] = w;
  }
  void drop_before(int64_t w) {
    while (head < tail && buf[head] < w) ++head;
  }
};

}  // namespace

void window_owner(const int64_t* doc_offsets, int64_t ndocs, const int64_t* win_offsets,
                  const int64_t* starts, const int64_t* lengths, int64_t size, OwnerRule rule,
                  bool* own) {
  const int64_t total = win_offsets[ndocs];
  std::memset(own, 0, static_cast<size_t>(total * size));
  // Documents are independent: each thread takes a range of them.
  parallel_for(ndocs, threads_for_bytes(total * size), [&](int64_t begin, int64_t end, int) {
    std::vector<int64_t> left, right;  // the deques' room (rule "center")
    for (int64_t doc = begin; doc < end; ++doc) {
      const int64_t w0 = win_offsets[doc];
      const int64_t w1 = win_offsets[doc + 1];
      if (rule == OwnerRule::first) {
        int64_t covered = 0;  // tokens [0, covered) already belong to earlier windows
        for (int64_t w = w0; w < w1; ++w) {
          const int64_t s = starts[w];
          const int64_t e = s + lengths[w];
          for (int64_t p = std::max(s, covered); p < e; ++p) own[w * size + (p - s)] = true;
          covered = std::max(covered, e);
        }
        continue;
      }
      if (w0 == w1) continue;
      const int64_t n = doc_offsets[doc + 1] - doc_offsets[doc];
      const int64_t covered_end = starts[w1 - 1] + lengths[w1 - 1];
      if (regular_layout(starts, lengths, w0, w1)) {
        // Equal lengths and rising starts: over the windows holding a token
        // the score rises, then falls (a tie at most at the top), and a
        // shorter last window scores below the one before it. So the best
        // window is where the climb stops, and never moves left as the token
        // moves right: one sweep.
        int64_t best = w0;
        for (int64_t p = 0; p < std::min(n, covered_end); ++p) {
          while (best < w1 && starts[best] + lengths[best] <= p) ++best;
          if (best == w1 || starts[best] > p) continue;  // not covered (tail="drop")
          while (best + 1 < w1 && starts[best + 1] <= p &&
                 center_score(p, starts[best + 1], lengths[best + 1]) >
                     center_score(p, starts[best], lengths[best])) {
            ++best;
          }
          own[best * size + (p - starts[best])] = true;
        }
        continue;
      }
      // Any other layout that passes the checks (a Windows built by hand:
      // repeated starts, short windows mid-document) takes the general way.
      // The windows holding token p are a run [lo, hi), since starts and ends
      // never decrease. Split it at m, the first window whose centre
      // (start + end - 1) is at or past 2p: before m the right context is the
      // smaller, from m on the left one. Within each part two windows' scores
      // differ by the same amount for every p they share (100 * (end - end')
      // + (len - len') before m, -100 * (start - start') + (len - len') from
      // m on), and lo, m and hi only move right as p does: so each part's
      // best window is a sliding-window maximum, kept in a deque whose front
      // is the earliest of its best. O(tokens + windows) per document, and
      // exact for any windows that pass the checks.
      left.assign(static_cast<size_t>(w1 - w0), 0);
      right.assign(static_cast<size_t>(w1 - w0), 0);
      MaxDeque lq{left.data()};
      MaxDeque rq{right.data()};
      int64_t lo = w0, hi = w0, centre = w0, lnext = w0, rnext = w0;
      for (int64_t p = 0; p < std::min(n, covered_end); ++p) {
        auto score = [&](int64_t w) { return center_score(p, starts[w], lengths[w]); };
        while (lo < w1 && starts[lo] + lengths[lo] <= p) ++lo;
        while (hi < w1 && starts[hi] <= p) ++hi;
        if (lo >= hi) continue;  // not covered (tail="drop")
        while (centre < w1 && 2 * starts[centre] + lengths[centre] - 1 < 2 * p) ++centre;
        const int64_t m = std::min(std::max(centre, lo), hi);
        lq.drop_before(lo);
        rq.drop_before(m);
        for (lnext = std::max(lnext, lo); lnext < m; ++lnext) lq.push(lnext, score);
        for (rnext = std::max(rnext, m); rnext < hi; ++rnext) rq.push(rnext, score);
        int64_t best = -1;
        if (!lq.empty()) best = lq.front();
        if (!rq.empty() && (best < 0 || score(rq.front()) > score(best))) best = rq.front();
        own[best * size + (p - starts[best])] = true;
      }
    }
  });
}

namespace {

// The first w in [a, b) with pred(w), for a pred that is false then true.
template <class Pred>
inline int64_t first_window_where(int64_t a, int64_t b, Pred pred) {
  while (a < b) {
    const int64_t m = a + (b - a) / 2;
    if (pred(m)) {
      b = m;
    } else {
      a = m + 1;
    }
  }
  return a;
}

// The first of values [0, m) whose exact sum over windows [lo, hi) (block(w)
// gives window w's values) lies outside T's range; m when every one fits. The
// sum runs modulo 2^64 counting its wraps (+1 up, -1 down): the exact sum is
// the wrapped one plus 2^64 times that count, so it fits when the count is 0.
template <class T, class Block>
int64_t first_unfit(int64_t lo, int64_t hi, const Block& block, int64_t m) {
  for (int64_t j = 0; j < m; ++j) {
    uint64_t sum = 0;
    int64_t wraps = 0;
    for (int64_t w = lo; w < hi; ++w) {
      const auto x = static_cast<uint64_t>(block(w)[j]);
      const uint64_t r = sum + x;
      if constexpr (std::is_signed_v<T>) {
        if (((sum ^ r) & (x ^ r)) >> 63) wraps += (x >> 63) ? -1 : 1;
      } else {
        wraps += r < x ? 1 : 0;
      }
      sum = r;
    }
    if (wraps != 0) return j;
  }
  return m;
}

// first = min(first, token), -1 meaning none: the smallest token, whichever
// thread finds it first.
inline void note_overflow(std::atomic<int64_t>& first, int64_t token) {
  int64_t seen = first.load();
  while ((seen < 0 || token < seen) && !first.compare_exchange_weak(seen, token)) {
  }
}

}  // namespace

template <class T>
int64_t stitch(const T* values, int64_t f, const int64_t* doc_offsets, int64_t ndocs,
            const int64_t* win_offsets, const int64_t* starts, const int64_t* lengths,
            int64_t size, Reduce reduce, T fill, T* out) {
  const int64_t tokens = doc_offsets[ndocs];
  const auto bytes = static_cast<int64_t>(sizeof(T)) * f;
  std::atomic<int64_t> first_overflow{-1};
  // Each output token pulls the slots that hold it, in window order, so a
  // token's reduction is the same sum on any number of threads, and threads
  // split the tokens (one long document uses them all). Within a document
  // window starts and ends never decrease (the caller checks), so the windows
  // holding token p are the run [lo, hi): end > p and start <= p.
  parallel_for(tokens, threads_for_bytes(tokens * bytes), [&](int64_t begin, int64_t end, int) {
    if (begin >= end) return;
    int64_t doc =
        std::upper_bound(doc_offsets, doc_offsets + ndocs + 1, begin) - doc_offsets - 1;
    int64_t t = begin;
    while (t < end) {
      while (doc_offsets[doc + 1] <= t) ++doc;
      const int64_t base = doc_offsets[doc];
      const int64_t stop = std::min(end, doc_offsets[doc + 1]);
      const int64_t w1 = win_offsets[doc + 1];
      const int64_t p0 = t - base;
      // lo: the first window ending after p0; hi: one past the last starting at or before it.
      int64_t lo = first_window_where(win_offsets[doc], w1, [&](int64_t w) {
        return starts[w] + lengths[w] > p0;
      });
      int64_t hi = first_window_where(lo, w1, [&](int64_t w) { return starts[w] > p0; });
      // Between window boundaries the windows holding a token stay the same,
      // so each such segment reduces whole contiguous blocks of values.
      for (int64_t p = p0; t < stop;) {
        while (lo < w1 && starts[lo] + lengths[lo] <= p) ++lo;
        while (hi < w1 && starts[hi] <= p) ++hi;
        int64_t q = p + (stop - t);
        if (lo < hi) q = std::min(q, starts[lo] + lengths[lo]);
        if (hi < w1) q = std::min(q, starts[hi]);
        const int64_t m = (q - p) * f;  // values in this segment
        [[maybe_unused]] bool wrapped = false;
        T* dst = out + t * f;
        auto block = [&](int64_t w) { return values + (w * size + (p - starts[w])) * f; };
        if (lo == hi) {
          std::fill(dst, dst + m, fill);
        } else if (reduce == Reduce::first) {
          // The earliest window holding a token is lo, for the whole segment.
          std::copy(block(lo), block(lo) + m, dst);
        } else if (reduce == Reduce::center) {
          // The best score over the windows holding the token, the earliest
          // on ties: what window_owner marks for any layout stitch accepts.
          for (int64_t j = 0; j < q - p; ++j) {
            int64_t best = lo;
            int64_t best_score = center_score(p + j, starts[lo], lengths[lo]);
            for (int64_t w = lo + 1; w < hi; ++w) {
              const int64_t score = center_score(p + j, starts[w], lengths[w]);
              if (score > best_score) {
                best = w;
                best_score = score;
              }
            }
            std::copy(block(best) + j * f, block(best) + (j + 1) * f, dst + j * f);
          }
        } else {
          std::copy(block(lo), block(lo) + m, dst);
          for (int64_t w = lo + 1; w < hi; ++w) {
            const T* src = block(w);
            if (reduce == Reduce::max) {
              maximum(dst, src, m);
            } else if constexpr (std::is_integral_v<T>) {
              wrapped |= accumulate_wraps(dst, src, m);
            } else {
              accumulate(dst, src, m);
            }
          }
          if constexpr (std::is_integral_v<T>) {
            // A wrapped partial sum is exact modulo 2^64: only a whole sum
            // past T's range is an error. Rare, so found by summing again.
            if (wrapped) {
              const int64_t j = first_unfit<T>(lo, hi, block, m);
              if (j < m) note_overflow(first_overflow, t + j / f);
            }
          }
          if (reduce == Reduce::mean && hi - lo > 1) divide(dst, static_cast<T>(hi - lo), m);
        }
        t += q - p;
        p = q;
      }
    }
  }, 64);
  return first_overflow.load();
}

template int64_t stitch<float>(const float*, int64_t, const int64_t*, int64_t, const int64_t*,
                               const int64_t*, const int64_t*, int64_t, Reduce, float, float*);
template int64_t stitch<double>(const double*, int64_t, const int64_t*, int64_t, const int64_t*,
                                const int64_t*, const int64_t*, int64_t, Reduce, double,
                                double*);
template int64_t stitch<int64_t>(const int64_t*, int64_t, const int64_t*, int64_t,
                                 const int64_t*, const int64_t*, const int64_t*, int64_t, Reduce,
                                 int64_t, int64_t*);
template int64_t stitch<uint64_t>(const uint64_t*, int64_t, const int64_t*, int64_t,
                                  const int64_t*, const int64_t*, const int64_t*, int64_t,
                                  Reduce, uint64_t, uint64_t*);

}  // namespace posembed
