#include "samples.hpp"

#include <algorithm>
#include <atomic>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "parallel.hpp"
#include "runtime.hpp"

namespace posembed {

namespace {

constexpr int kWords = 624;
constexpr int kShift = 397;

// MT19937's regeneration of all 624 words, in place, as NumPy's mt19937_gen.
void regenerate(LegacyState& s) {
  constexpr uint32_t upper = 0x80000000u, lower = 0x7fffffffu, matrix = 0x9908b0dfu;
  uint32_t* key = s.key;
  const auto mix = [&](int i, int next, int far) {
    const uint32_t y = (key[i] & upper) | (key[next] & lower);
    key[i] = key[far] ^ (y >> 1) ^ ((y & 1u) ? matrix : 0u);
  };
  int i = 0;
  for (; i < kWords - kShift; ++i) mix(i, i + 1, i + kShift);
  for (; i < kWords - 1; ++i) mix(i, i + 1, i + kShift - kWords);
  mix(kWords - 1, 0, kShift - 1);
  s.pos = 0;
}

// One read of a caller's value (see read_once in parallel.hpp).
template <class T>
int64_t load_once(const T* p) {
  return static_cast<int64_t>(*static_cast<const volatile T*>(p));
}

// Document-index positions per chunk of the sample index's two passes: the
// prefix sum is exact, so neither the chunking nor the thread count changes
// a value.
constexpr int64_t kChunk = int64_t{1} << 15;
// How far ahead the gather and the shuffle prefetch what they will touch.
constexpr size_t kAhead = 32;
constexpr int64_t kAheadPositions = static_cast<int64_t>(kAhead);
constexpr int64_t kMaxTokens = int64_t{1} << 62;

}  // namespace

namespace {

uint32_t temper(uint32_t y) {
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

inline uint32_t next32(LegacyState& s) {
  if (s.pos >= kWords) regenerate(s);
  return temper(s.key[s.pos++]);
}

// random_interval's draw for max with its mask (the smallest all-ones value >= max).
inline uint64_t interval(LegacyState& s, uint64_t max, uint64_t mask) {
  uint64_t value;
  if (max <= 0xffffffffu) {
    do {
      value = next32(s) & mask;
    } while (value > max);
  } else {
    do {
      const uint64_t high = next32(s);  // NumPy's next_uint64: the first draw is high
      value = ((high << 32) | next32(s)) & mask;
    } while (value > max);
  }
  return value;
}

uint64_t mask_of(uint64_t max) {
  uint64_t mask = max;
  for (int shift = 1; shift <= 32; shift *= 2) mask |= mask >> shift;
  return mask;
}

}  // namespace

uint32_t legacy_next32(LegacyState& s) { return next32(s); }

uint64_t legacy_interval(LegacyState& s, uint64_t max) {
  return max == 0 ? 0 : interval(s, max, mask_of(max));
}

template <class T>
void legacy_shuffle(T* x, int64_t n, LegacyState& s) {
  // The draws do not depend on the array: a block of them first, then their
  // swaps, each one's far element prefetched well before it is swapped.
  constexpr int64_t kBlock = 4096;
  std::unique_ptr<uint64_t[]> far(new uint64_t[kBlock]);
  // The generator's words tempered all at once when they are made (a loop
  // the compiler vectorises), so that a draw is one load.
  uint32_t words[kWords];
  const auto temper_all = [&]() {
    for (int i = 0; i < kWords; ++i) words[i] = temper(s.key[i]);
  };
  if (s.pos < kWords) temper_all();
  const auto next = [&]() -> uint64_t {
    if (s.pos >= kWords) {
      regenerate(s);
      temper_all();
    }
    return words[s.pos++];
  };
  uint64_t mask = n > 1 ? mask_of(static_cast<uint64_t>(n - 1)) : 0;
  for (int64_t top = n - 1; top >= 1; top -= kBlock) {
    const int64_t m = std::min(kBlock, top);  // i = top, top - 1, ..., top - m + 1
    const auto count = static_cast<size_t>(m);
    for (size_t t = 0; t < count; ++t) {
      const auto max = static_cast<uint64_t>(top) - t;
      while ((mask >> 1) >= max) mask >>= 1;  // i falls: its mask narrows
      // random_interval(max), as interval() draws it
      uint64_t value;
      if (max <= 0xffffffffu) {
        do {
          value = next() & mask;
        } while (value > max);
      } else {
        do {
          const uint64_t high = next();  // NumPy's next_uint64: the first draw is high
          value = ((high << 32) | next()) & mask;
        } while (value > max);
      }
      far[t] = value;
    }
    for (size_t t = 0; t < count; ++t) {
      if (t + kAhead < count) __builtin_prefetch(x + far[t + kAhead], 1);
      std::swap(x[static_cast<uint64_t>(top) - t], x[far[t]]);
    }
  }
}

namespace {

// sample_index on one thread, in one pass: each length is read, checked and
// used at once, so nothing is kept (the result is the same as the two
// passes' below).
template <class Len, class Doc, class Out>
SampleIndexFault sample_index_one_pass(const Len* lengths, int64_t nlengths, const Doc* doc_index,
                                       int64_t ndoc, int64_t seq_len, int64_t extra,
                                       int64_t num_samples, Out* out) {
  out[0] = 0;
  out[1] = 0;
  int64_t s = 1;
  int64_t last = seq_len + extra - 1;  // the stream's token that sample s needs last
  int64_t before = 0;                  // the stream's tokens before position k
  int64_t n = 0;
  for (int64_t k = 0; k < ndoc; ++k) {
    if (k + kAheadPositions < ndoc) {
      // only a hint, clamped into the array: it is checked when it is read
      const auto ahead = static_cast<uint64_t>(doc_index[k + kAheadPositions]);
      __builtin_prefetch(lengths + std::min(ahead, static_cast<uint64_t>(nlengths - 1)));
    }
    const int64_t d = load_once(doc_index + k);
    n = (d >= 0 && d < nlengths) ? load_once(lengths + d) : -1;
    int64_t after = 0;
    if (n < 0 || __builtin_add_overflow(before, n, &after) || after >= kMaxTokens) {
      SampleIndexFault fault;
      fault.position = n < 0 ? k : -1;
      fault.document = d;
      fault.length = n;
      fault.too_many_tokens = n >= 0;
      return fault;
    }
    for (; s <= num_samples && last < after; ++s, last += seq_len) {
      out[2 * s] = static_cast<Out>(k);
      out[2 * s + 1] = static_cast<Out>(s * seq_len - before);
    }
    before = after;
  }
  for (; s <= num_samples; ++s) {  // past the stream's end, as Megatron's loop leaves them
    out[2 * s] = static_cast<Out>(ndoc - 1);
    out[2 * s + 1] = static_cast<Out>(n - extra);
  }
  return SampleIndexFault{};
}

}  // namespace

template <class Len, class Doc, class Out>
SampleIndexFault sample_index(const Len* lengths, int64_t nlengths, const Doc* doc_index,
                              int64_t ndoc, int64_t seq_len, int64_t extra, int64_t num_samples,
                              Out* out) {
  const int threads = threads_for_bytes(ndoc * static_cast<int64_t>(sizeof(Len) + sizeof(Doc)));
  if (usable_threads(threads) <= 1) {
    return sample_index_one_pass(lengths, nlengths, doc_index, ndoc, seq_len, extra, num_samples,
                                 out);
  }
  const int64_t nchunks = (ndoc + kChunk - 1) / kChunk;
  // The lengths in document-index order, as read once: all the second pass uses.
  std::unique_ptr<Len[]> gathered(new Len[static_cast<size_t>(ndoc)]);
  std::vector<int64_t> tokens(static_cast<size_t>(nchunks) + 1, 0);  // chunk c's at c + 1
  std::vector<SampleIndexFault> faults(static_cast<size_t>(nchunks));
  parallel_for(nchunks, threads, [&](int64_t c0, int64_t c1, int) {
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t k0 = c * kChunk, k1 = std::min(ndoc, k0 + kChunk);
      SampleIndexFault& fault = faults[static_cast<size_t>(c)];
      int64_t sum = 0;
      for (int64_t k = k0; k < k1; ++k) {
        if (k + kAheadPositions < k1) {
          // only a hint, clamped into the array: it is checked when it is read
          const auto ahead = static_cast<uint64_t>(doc_index[k + kAheadPositions]);
          __builtin_prefetch(lengths + std::min(ahead, static_cast<uint64_t>(nlengths - 1)));
        }
        const int64_t d = load_once(doc_index + k);
        const int64_t n = (d >= 0 && d < nlengths) ? load_once(lengths + d) : -1;
        if (n < 0 || __builtin_add_overflow(sum, n, &sum) || sum >= kMaxTokens) {
          fault.position = n < 0 ? k : -1;
          fault.document = d;
          fault.length = n;
          fault.too_many_tokens = n >= 0;
          break;
        }
        gathered[static_cast<size_t>(k)] = static_cast<Len>(n);
      }
      tokens[static_cast<size_t>(c) + 1] = sum;
    }
  });
  for (const SampleIndexFault& fault : faults) {
    if (fault.position >= 0 || fault.too_many_tokens) return fault;  // the first, by position
  }
  for (size_t c = 0; c < static_cast<size_t>(nchunks); ++c) {
    if (__builtin_add_overflow(tokens[c + 1], tokens[c], &tokens[c + 1]) ||
        tokens[c + 1] >= kMaxTokens) {
      SampleIndexFault fault;
      fault.too_many_tokens = true;
      return fault;
    }
  }
  // The first sample whose last needed token, s * seq_len + extra - 1, is at
  // or past the stream's token t.
  const auto first_sample_at = [&](int64_t t) {
    const int64_t u = t - extra + 1;
    return u <= 0 ? int64_t{0} : (u + seq_len - 1) / seq_len;
  };
  out[0] = 0;
  out[1] = 0;
  parallel_for(nchunks, threads, [&](int64_t c0, int64_t c1, int) {
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t base = tokens[static_cast<size_t>(c)];
      const int64_t end = tokens[static_cast<size_t>(c) + 1];
      const int64_t s0 = std::max<int64_t>(1, first_sample_at(base));
      const int64_t s1 = std::min(num_samples + 1, first_sample_at(end));
      int64_t k = c * kChunk;
      int64_t before = base;  // the stream's tokens before position k
      for (int64_t s = s0; s < s1; ++s) {
        const int64_t last = s * seq_len + extra - 1;  // < end: k stays in the chunk
        while (before + static_cast<int64_t>(gathered[static_cast<size_t>(k)]) <= last) {
          before += static_cast<int64_t>(gathered[static_cast<size_t>(k)]);
          ++k;
        }
        out[2 * s] = static_cast<Out>(k);
        out[2 * s + 1] = static_cast<Out>(s * seq_len - before);
      }
    }
  });
  // Samples that would read past the stream's end: Megatron's loop stops at
  // the last document, extra tokens before its end, for each of them.
  const int64_t tail = static_cast<int64_t>(gathered[static_cast<size_t>(ndoc - 1)]) - extra;
  for (int64_t s = std::max<int64_t>(1, first_sample_at(tokens.back())); s <= num_samples; ++s) {
    out[2 * s] = static_cast<Out>(ndoc - 1);
    out[2 * s + 1] = static_cast<Out>(tail);
  }
  return SampleIndexFault{};
}

template <class Len>
SampleIndexFault document_tokens(const Len* lengths, int64_t nlengths, const int64_t* documents,
                                 int64_t count, int64_t* total) {
  const int64_t nchunks = (count + kChunk - 1) / kChunk;
  std::vector<int64_t> tokens(static_cast<size_t>(nchunks), 0);
  std::vector<SampleIndexFault> faults(static_cast<size_t>(nchunks));
  parallel_for(nchunks, threads_for_bytes(count * static_cast<int64_t>(sizeof(Len))),
               [&](int64_t c0, int64_t c1, int) {
                 for (int64_t c = c0; c < c1; ++c) {
                   const int64_t k0 = c * kChunk, k1 = std::min(count, k0 + kChunk);
                   SampleIndexFault& fault = faults[static_cast<size_t>(c)];
                   int64_t sum = 0;
                   for (int64_t k = k0; k < k1; ++k) {
                     const int64_t d = documents != nullptr ? load_once(documents + k) : k;
                     const int64_t n = (d >= 0 && d < nlengths) ? load_once(lengths + d) : -1;
                     if (n < 0 || __builtin_add_overflow(sum, n, &sum) || sum >= kMaxTokens) {
                       fault.position = n < 0 ? k : -1;
                       fault.document = d;
                       fault.length = n;
                       fault.too_many_tokens = n >= 0;
                       break;
                     }
                   }
                   tokens[static_cast<size_t>(c)] = sum;
                 }
               });
  int64_t sum = 0;
  for (size_t c = 0; c < static_cast<size_t>(nchunks); ++c) {
    if (faults[c].position >= 0 || faults[c].too_many_tokens) return faults[c];
    if (__builtin_add_overflow(sum, tokens[c], &sum) || sum >= kMaxTokens) {
      SampleIndexFault fault;
      fault.too_many_tokens = true;
      return fault;
    }
  }
  *total = sum;
  return SampleIndexFault{};
}

template <class Doc>
int64_t tile_documents(const int64_t* documents, int64_t ndocs, int64_t nlengths, int64_t epochs,
                       Doc* out) {
  // The first epoch from the caller's ids (each read once, checked), the
  // others copied from it: what was checked is what every epoch holds.
  std::atomic<int64_t> first_bad{-1};
  const auto bytes = static_cast<int64_t>(sizeof(Doc));
  parallel_for(ndocs, threads_for_bytes(ndocs * bytes), [&](int64_t lo, int64_t hi, int) {
    for (int64_t k = lo; k < hi; ++k) {
      const int64_t d = documents != nullptr ? load_once(documents + k) : k;
      if (d < 0 || d >= nlengths || d > static_cast<int64_t>(std::numeric_limits<Doc>::max())) {
        int64_t seen = first_bad.load();
        while ((seen < 0 || k < seen) && !first_bad.compare_exchange_weak(seen, k)) {
        }
        return;  // later ids of this range cannot come first
      }
      out[k] = static_cast<Doc>(d);
    }
  });
  if (first_bad.load() >= 0) return first_bad.load();
  const int64_t rest = ndocs * (epochs - 1);
  parallel_for(rest, threads_for_bytes(rest * bytes), [&](int64_t lo, int64_t hi, int) {
    for (int64_t i = lo; i < hi; ++i) out[ndocs + i] = out[i % ndocs];
  });
  return -1;
}

template <class T>
void iota(T* out, int64_t n) {
  parallel_for(n, threads_for_bytes(n * static_cast<int64_t>(sizeof(T))),
               [&](int64_t lo, int64_t hi, int) {
                 for (int64_t i = lo; i < hi; ++i) out[i] = static_cast<T>(i);
               });
}

template void legacy_shuffle<int32_t>(int32_t*, int64_t, LegacyState&);
template void legacy_shuffle<int64_t>(int64_t*, int64_t, LegacyState&);
template void legacy_shuffle<uint32_t>(uint32_t*, int64_t, LegacyState&);
template int64_t tile_documents<int32_t>(const int64_t*, int64_t, int64_t, int64_t, int32_t*);
template int64_t tile_documents<int64_t>(const int64_t*, int64_t, int64_t, int64_t, int64_t*);
template SampleIndexFault document_tokens<int32_t>(const int32_t*, int64_t, const int64_t*,
                                                   int64_t, int64_t*);
template SampleIndexFault document_tokens<int64_t>(const int64_t*, int64_t, const int64_t*,
                                                   int64_t, int64_t*);
template void iota<uint32_t>(uint32_t*, int64_t);
template void iota<int64_t>(int64_t*, int64_t);

#define POSEMBED_SAMPLE_INDEX(LEN, DOC, OUT)                                                     \
  template SampleIndexFault sample_index<LEN, DOC, OUT>(const LEN*, int64_t, const DOC*,        \
                                                        int64_t, int64_t, int64_t, int64_t, OUT*);
POSEMBED_SAMPLE_INDEX(int32_t, int32_t, int32_t)
POSEMBED_SAMPLE_INDEX(int32_t, int32_t, int64_t)
POSEMBED_SAMPLE_INDEX(int32_t, int64_t, int32_t)
POSEMBED_SAMPLE_INDEX(int32_t, int64_t, int64_t)
POSEMBED_SAMPLE_INDEX(int64_t, int32_t, int32_t)
POSEMBED_SAMPLE_INDEX(int64_t, int32_t, int64_t)
POSEMBED_SAMPLE_INDEX(int64_t, int64_t, int32_t)
POSEMBED_SAMPLE_INDEX(int64_t, int64_t, int64_t)
#undef POSEMBED_SAMPLE_INDEX

}  // namespace posembed
