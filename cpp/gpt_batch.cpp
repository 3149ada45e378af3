// gpt_batch: see gpt_batch.hpp.
#include "gpt_batch.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <mutex>
#include <type_traits>

#include "fileio.hpp"
#include "parallel.hpp"

namespace posembed {
namespace {

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

// n tokens of type T at `src` widened into `dst`; the first one int64 cannot
// hold (uint64 past 2^63 - 1) is returned as its index, else -1.
template <class T>
int64_t widen(const void* src, int64_t n, int64_t* dst) {
  const auto* from = static_cast<const T*>(src);
  if constexpr (std::is_same_v<T, uint64_t>) {
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t t = from[i];
      if (t > static_cast<uint64_t>(kInt64Max)) return i;
      dst[i] = static_cast<int64_t>(t);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<int64_t>(from[i]);
  }
  return -1;
}

int64_t widen_kind(IntKind kind, const void* src, int64_t n, int64_t* dst) {
  switch (kind) {
    case IntKind::i8: return widen<int8_t>(src, n, dst);
    case IntKind::i16: return widen<int16_t>(src, n, dst);
    case IntKind::i32: return widen<int32_t>(src, n, dst);
    case IntKind::i64: return widen<int64_t>(src, n, dst);
    case IntKind::u8: return widen<uint8_t>(src, n, dst);
    case IntKind::u16: return widen<uint16_t>(src, n, dst);
    case IntKind::u32: return widen<uint32_t>(src, n, dst);
    case IntKind::u64: return widen<uint64_t>(src, n, dst);
  }
  return -1;
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

// Tokens [first, first + n) of the corpus into dst (int64).
bool read_tokens(const TokenSource& src, int64_t sequence, int64_t at, int64_t first, int64_t n,
                 int64_t* dst, std::vector<uint8_t>& bytes, Fault& f) {
  if (n == 0) return true;
  const int64_t item = item_size(src.kind);
  const void* from = nullptr;
  if (src.memory != nullptr) {
    from = static_cast<const uint8_t*>(src.memory) + first * item;
  } else {
    bytes.resize(static_cast<size_t>(n * item));
    int64_t ended = 0;
    const int err = pread_all(src.fd, bytes.data(), n * item, src.file_offset + first * item,
                              &ended);
    if (err == -1) return fail(f, BatchFault::ended, ended);
    if (err != 0) return fail(f, BatchFault::io, err);
    if (src.swap) byteswap_items(bytes.data(), n, item);
    from = bytes.data();
  }
  const int64_t bad = widen_kind(src.kind, from, n, dst);
  if (bad >= 0) {
    // the value as read (the caller's memory may change: dst never got it)
    uint64_t value = 0;
    std::memcpy(&value, static_cast<const uint8_t*>(from) + bad * item, 8);
    return fail(f, BatchFault::token, sequence, static_cast<int64_t>(value), at + bad);
  }
  return true;
}

// The tokens of the sample at position `want` of the shuffle index, as
// GPTDataset._query_document_sample_shuffle_indices reads them, into text
// (width W, padded); each index and offset read once and checked.
bool read_row(const IndexView& di, const IndexView& si, const IndexView& sh, int64_t want,
              const TokenSource& src, const BatchOptions& o, int64_t* text,
              std::vector<uint8_t>& bytes, Fault& f) {
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
    if (!read_tokens(src, sequence, start, lo + start, stop - start, text + filled, bytes, f)) {
      return false;
    }
    filled += stop - start;
  }
  const bool ends_the_corpus = last == di.count - 1 && stop == length;
  if (filled < width && !ends_the_corpus) {
    return fail(f, BatchFault::underfill, sequence, length, filled);
  }
  std::fill(text + filled, text + width, o.pad);
  return true;
}

// GPTDataset.__getitem__'s outputs of one sample from its tokens `text`;
// returns the longest document, sets *segments.
int64_t fill_row(const int64_t* text, const BatchOptions& o, int64_t r, const BatchOut& out,
                 int64_t* segments) {
  const int64_t S = o.sequence_length;
  int64_t* tokens = out.tokens + r * S;
  int64_t* labels = out.labels + r * S;
  float* loss = out.loss_mask + r * S;
  int64_t* positions = out.position_ids + r * S;
  int32_t* cu = out.cu_padded + r * (S + 1);
  // tokens, labels and the loss mask: element by element, no dependence
  // between elements (the last label, without the extra token, is padding)
  const int64_t paired = o.extra != 0 ? S : S - 1;
  for (int64_t i = 0; i < paired; ++i) {
    const int64_t t = text[i], l = text[i + 1];
    tokens[i] = t == o.pad ? 0 : t;
    labels[i] = l == o.pad ? 0 : l;
    loss[i] = ((o.eod_mask_loss && t == o.eod) || l == o.pad) ? 0.0f : 1.0f;
  }
  if (paired < S) {
    const int64_t t = text[S - 1];
    tokens[S - 1] = t == o.pad ? 0 : t;
    labels[S - 1] = 0;  // the pad label, replaced
    loss[S - 1] = 0.0f;
  }
  // the documents: each ends after an end-of-document token
  int64_t count = 0, document_start = 0, position_start = 0, longest = 0;
  cu[0] = 0;
  if (o.reset_position_ids || o.reset_attention_mask) {
    for (int64_t i = 0; i < S; ++i) {
      if (text[i] != o.eod) continue;
      if (o.reset_position_ids) {
        for (int64_t j = position_start; j <= i; ++j) positions[j] = j - position_start;
        position_start = i + 1;
      }
      if (o.reset_attention_mask && i + 1 < S) {
        cu[++count] = static_cast<int32_t>(i + 1);
        longest = std::max(longest, i + 1 - document_start);
        document_start = i + 1;
      }
    }
  }
  for (int64_t j = position_start; j < S; ++j) positions[j] = j - position_start;
  cu[++count] = static_cast<int32_t>(S);
  longest = std::max(longest, S - document_start);
  std::fill(cu + count + 1, cu + S + 1, static_cast<int32_t>(S));
  *segments = count;
  if (out.attention_mask != nullptr) {
    // True (1) = masked: keys after the query, or before its document's start
    uint8_t* mask = out.attention_mask + r * S * S;
    for (int64_t k = 0; k < count; ++k) {
      const int64_t a = cu[k], b = cu[k + 1];
      for (int64_t q = a; q < b; ++q) {
        uint8_t* row = mask + q * S;
        std::memset(row, 1, static_cast<size_t>(a));
        std::memset(row + a, 0, static_cast<size_t>(q - a + 1));
        std::memset(row + q + 1, 1, static_cast<size_t>(S - q - 1));
      }
    }
  }
  return longest;
}

}  // namespace

BatchResult gpt_batch(const IndexView& document_index, const IndexView& sample_index,
                      const IndexView& shuffle_index, const int64_t* wanted, int64_t rows,
                      const TokenSource& source, const BatchOptions& options, const BatchOut& out,
                      int threads) {
  BatchResult result;
  result.segments.assign(static_cast<size_t>(rows), 0);
  std::vector<int64_t> longest(static_cast<size_t>(rows), 0);
  std::mutex guard;
  Fault first_fault;
  int64_t fault_row = -1;
  const int64_t width = options.sequence_length + options.extra;
  parallel_for(rows, threads, [&](int64_t begin, int64_t end, int) {
    std::vector<int64_t> text(source.text != nullptr ? 0 : static_cast<size_t>(width));
    std::vector<uint8_t> bytes;
    for (int64_t r = begin; r < end; ++r) {
      const int64_t* row = nullptr;
      if (source.text != nullptr) {
        row = source.text + r * width;
      } else {
        Fault f;
        if (!read_row(document_index, sample_index, shuffle_index, wanted[r], source, options,
                      text.data(), bytes, f)) {
          const std::lock_guard<std::mutex> lock(guard);
          if (fault_row < 0 || r < fault_row) {
            fault_row = r;
            first_fault = f;
          }
          return;  // later rows of this chunk cannot be the first fault
        }
        row = text.data();
      }
      longest[static_cast<size_t>(r)] =
          fill_row(row, options, r, out, &result.segments[static_cast<size_t>(r)]);
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
