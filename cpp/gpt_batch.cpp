// gpt_batch: see gpt_batch.hpp.
#include "gpt_batch.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <mutex>
#include <type_traits>

#include <vector>

#include "fileio.hpp"
#include "mapped.hpp"
#include "parallel.hpp"
#include "simd.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

// The outputs of a row from its tokens, one copy per SIMD level (see simd.hpp).
#define POSEMBED_SIMD_SOURCE "gpt_batch.simd.inc"
#include "simd_levels.inc"
#undef POSEMBED_SIMD_SOURCE

namespace posembed {
namespace {

using FillRow = int64_t (*)(IntKind, const void*, int64_t, const BatchOptions&, int64_t,
                            const BatchOut&, int64_t*, std::vector<int64_t>&);

FillRow fill_row_for_this_cpu() {
#if POSEMBED_SIMD_DISPATCH
  switch (simd_level()) {
    case SimdLevel::avx512: return &simd_avx512::fill_row;
    case SimdLevel::avx2: return &simd_avx2::fill_row;
    case SimdLevel::baseline: break;
  }
#endif
  return &simd_baseline::fill_row;
}

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// Element i of one of the caller's index arrays, read once.
int64_t load(const IndexView& v, int64_t i) {
  if (v.wide) return read_once(static_cast<const int64_t*>(v.data) + i);
  if (v.is_unsigned) return *(static_cast<const volatile uint32_t*>(v.data) + i);
  return *(static_cast<const volatile int32_t*>(v.data) + i);
}

int64_t item_size(IntKind kind) {
  switch (kind) {
    case IntKind::i8:
    case IntKind::u8: return 1;
    case IntKind::i16:
    case IntKind::u16: return 2;
    case IntKind::i32:
    case IntKind::u32: return 4;
    default: return 8;
  }
}

struct Fault {
  BatchFault kind = BatchFault::none;
  int64_t sample = 0, a = 0, b = 0, c = 0, d = 0;
};

bool fail(Fault& f, BatchFault kind, int64_t a, int64_t b = 0, int64_t c = 0, int64_t d = 0) {
  f.kind = kind;
  f.a = a;
  f.b = b;
  f.c = c;
  f.d = d;
  return false;
}

// Tokens [first, first + n) of the corpus into dst, as they are stored
// (byte-swapped to this machine's order); uint64 tokens checked below 2^63.
bool read_tokens(const TokenSource& src, int64_t sequence, int64_t at, int64_t first, int64_t n,
                 uint8_t* dst, Fault& f) {
  if (n == 0) return true;
  const int64_t item = item_size(src.kind);
  if (src.memory != nullptr) {
    std::memcpy(dst, static_cast<const uint8_t*>(src.memory) + first * item,
                static_cast<size_t>(n * item));
  } else {
    int64_t ended = 0;
    const int err = read_mapped(src.fd, src.map, src.map_size, dst, n * item,
                                src.file_offset + first * item, &ended);
    if (err == -1) return fail(f, BatchFault::ended, ended);
    if (err != 0) return fail(f, BatchFault::io, err);
    if (src.swap) byteswap_items(dst, n, item);
  }
  if (src.kind == IntKind::u64) {
    // checked in the copy: the caller's memory may change after
    for (int64_t i = 0; i < n; ++i) {
      uint64_t value = 0;
      std::memcpy(&value, dst + i * 8, 8);
      if (value > static_cast<uint64_t>(kInt64Max)) {
        return fail(f, BatchFault::token, sequence, static_cast<int64_t>(value), at + i);
      }
    }
  }
  return true;
}

// The tokens of the sample at position `want` of the shuffle index, as
// GPTDataset._query_document_sample_shuffle_indices reads them, into text
// (`raw`, room for the width W in the corpus's type; *filled of them read,
// the rest is padding); each index and offset read once and checked.
bool read_row(const IndexView& di, const IndexView& si, const IndexView& sh, int64_t want,
              const TokenSource& src, const BatchOptions& o, uint8_t* raw, int64_t* read,
              Fault& f) {
  const int64_t width = o.sequence_length + o.extra;
  const int64_t nsamples = si.count / 2 - 1;
  if (want < 0 || want >= sh.count) return fail(f, BatchFault::index, want, sh.count);
  const int64_t number = load(sh, want);
  if (number < 0 || number >= nsamples) return fail(f, BatchFault::shuffle, number, nsamples);
  f.sample = number;
  const int64_t first = load(si, 2 * number), first_offset = load(si, 2 * number + 1);
  const int64_t last = load(si, 2 * number + 2), last_offset = load(si, 2 * number + 3);
  if (!(0 <= first && first <= last && last < di.count)) {
    return fail(f, BatchFault::span, 0, first, last, di.count);
  }
  int64_t filled = 0, stop = 0, length = 0, sequence = 0;
  for (int64_t position = first; position <= last; ++position) {
    sequence = load(di, position);
    if (sequence < 0 || sequence >= src.nseq) {
      return fail(f, BatchFault::sequence, sequence, 0, 0, src.nseq);
    }
    const int64_t lo = read_once(src.offsets + sequence);
    const int64_t hi = read_once(src.offsets + sequence + 1);
    if (lo < 0 || hi < lo || hi > src.ntokens) {
      return fail(f, BatchFault::offsets, sequence, lo, hi, src.ntokens);
    }
    length = hi - lo;
    if (src.lengths != nullptr) {
      const IndexView built{src.lengths, src.nseq, src.wide_lengths, false};
      const int64_t expected = load(built, sequence);
      if (expected != length) return fail(f, BatchFault::length, sequence, length, expected);
    }
    const int64_t start = position == first ? first_offset : 0;
    const int64_t end = position == last ? last_offset : length;
    if (start < 0 || end < start || end > length || (position == last && end + o.extra > length)) {
      const int64_t shown = position == last && end <= length ? end + o.extra : end;
      return fail(f, BatchFault::piece, sequence, length, start, shown);
    }
    stop = position == last ? end + o.extra : end;
    if (stop - start > width - filled) {
      return fail(f, BatchFault::overfill, sequence, length, filled + stop - start);
    }
    if (!read_tokens(src, sequence, start, lo + start, stop - start,
                     raw + filled * item_size(src.kind), f)) {
      return false;
    }
    filled += stop - start;
  }
  const bool ends_the_corpus = last == di.count - 1 && stop == length;
  if (filled < width && !ends_the_corpus) {
    return fail(f, BatchFault::underfill, sequence, length, filled);
  }
  *read = filled;
  return true;
}

}  // namespace

BatchResult gpt_batch(const IndexView& document_index, const IndexView& sample_index,
                      const IndexView& shuffle_index, const int64_t* wanted, int64_t rows,
                      const TokenSource& source, const BatchOptions& options, const BatchOut& out,
                      int threads) {
  BatchResult result;
  result.segments.assign(static_cast<size_t>(rows), 0);
  result.longest.assign(static_cast<size_t>(rows), 0);
  std::vector<int64_t>& longest = result.longest;
  std::mutex guard;
  Fault first_fault;
  int64_t fault_row = -1;
  const int64_t width = options.sequence_length + options.extra;
  const FillRow fill_row = fill_row_for_this_cpu();
  const IntKind kind = source.text != nullptr ? IntKind::i64 : source.kind;
  const auto row_bytes = static_cast<size_t>(width * item_size(kind));
  parallel_for(rows, threads, [&](int64_t begin, int64_t end, int) {
    std::vector<uint8_t> raw(source.text != nullptr ? 0 : row_bytes);
    std::vector<int64_t> eods;
    for (int64_t r = begin; r < end; ++r) {
      const void* row = nullptr;
      int64_t filled = width;
      if (source.text != nullptr) {
        row = source.text + r * width;
      } else {
        Fault f;
        if (!read_row(document_index, sample_index, shuffle_index, wanted[r], source, options,
                      raw.data(), &filled, f)) {
          const std::lock_guard<std::mutex> lock(guard);
          if (fault_row < 0 || r < fault_row) {
            fault_row = r;
            first_fault = f;
          }
          return;  // later rows of this chunk cannot be the first fault
        }
        row = raw.data();
      }
      longest[static_cast<size_t>(r)] = fill_row(kind, row, filled, options, r, out,
                                                 &result.segments[static_cast<size_t>(r)], eods);
    }
  });
  if (fault_row >= 0) {
    result.fault = first_fault.kind;
    result.row = fault_row;
    result.sample = first_fault.sample;
    result.a = first_fault.a;
    result.b = first_fault.b;
    result.c = first_fault.c;
    result.d = first_fault.d;
    return result;
  }
  for (const int64_t l : longest) result.max_seqlen = std::max(result.max_seqlen, l);
  return result;
}

void flat_cu_seqlens(const int32_t* cu_padded, const int64_t* segments, int64_t rows,
                     int64_t sequence_length, int32_t* flat) {
  int64_t at = 0;
  flat[at++] = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t* cu = cu_padded + r * (sequence_length + 1);
    for (int64_t k = 1; k <= segments[r]; ++k) {
      flat[at++] = static_cast<int32_t>(r * sequence_length + cu[k]);
    }
  }
}

}  // namespace posembed
