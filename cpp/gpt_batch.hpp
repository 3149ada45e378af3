// gpt_batch: a batch of Megatron-LM GPT samples as a trainer consumes it,
// equal element for element to GPTDataset.__getitem__ (tokens, labels,
// loss_mask, position_ids, the dense attention mask) plus the document
// boundaries that variable-length attention kernels take (cu_seqlens).
//
// Each sample is read from the three GPTDataset indices and a corpus (tokens
// in memory, a file read with positional reads, or rows the caller read);
// a document ends after each end-of-document token, as Megatron's
// reset_attention_mask cuts them. Samples are independent: they are spread
// over threads and each output element depends on its sample alone, so the
// results are the same for any thread count.
#pragma once

#include <cstdint>
#include <vector>

#include "positions.hpp"

namespace posembed {

// One of the integer arrays of GPTSamples: int32/uint32 (wide = false) or
// int64 (wide = true), read one element at a time.
struct IndexView {
  const void* data = nullptr;
  int64_t count = 0;
  bool wide = false;
  bool is_unsigned = false;  // uint32 (the shuffle index below 2^32 - 2 samples)
};

// Where the tokens come from: `text` (rows of width sequence_length + extra
// the caller read and checked), else `memory` (tokens of `kind`, `ntokens`
// of them), else the file `fd` (token t at byte file_offset + t * size of
// `kind`, byte-swapped when `swap`; `ntokens` of them).
struct TokenSource {
  const int64_t* text = nullptr;
  const void* memory = nullptr;
  int fd = -1;
  const uint8_t* map = nullptr;  // the file's first map_size bytes mapped (mapped.hpp), or null
  int64_t map_size = 0;
  IntKind kind = IntKind::i64;
  int64_t ntokens = 0;
  int64_t file_offset = 0;
  bool swap = false;
  const int64_t* offsets = nullptr;  // nseq + 1 token offsets of the sequences
  int64_t nseq = 0;
  const void* lengths = nullptr;  // the lengths the samples were built from, or null
  bool wide_lengths = false;
};

struct BatchOptions {
  int64_t sequence_length = 1;
  int64_t extra = 1;
  int64_t eod = 0;
  int64_t pad = -1;
  bool reset_position_ids = false;
  bool reset_attention_mask = false;
  bool eod_mask_loss = false;
};

// The outputs, each [rows, ...] C-contiguous; attention_mask may be null.
struct BatchOut {
  int64_t* tokens;
  int64_t* labels;
  float* loss_mask;
  int64_t* position_ids;
  int32_t* cu_padded;       // [rows, S + 1]
  uint8_t* attention_mask;  // [rows, S, S] bools, or null
};

// What went wrong first (the lowest row with a problem).
enum class BatchFault : int {
  none,
  index,           // a: the row's index (outside the shuffle index)
  shuffle,         // a: shuffle value, b: sample count
  span,            // sample: b..c positions of a document index of d
  sequence,        // sequence a, of d sequences
  offsets,         // sequence a spans b..c outside the d tokens
  length,          // sequence a holds b tokens, built from c
  piece,           // sequence a of b tokens read c..d
  overfill,        // sequence a of b tokens, c tokens read past width
  underfill,       // c tokens read, ending in sequence a of b tokens
  token,           // sequence a holds token id b (its bits as uint64) at its token c
  ended,           // the file ended at byte a
  io,              // errno a
};

struct BatchResult {
  BatchFault fault = BatchFault::none;
  int64_t row = -1;
  int64_t sample = 0;
  int64_t a = 0, b = 0, c = 0, d = 0;
  int64_t max_seqlen = 0;
  std::vector<int64_t> segments;  // per row, its documents
  std::vector<int64_t> longest;   // per row, its longest document
};

// Fills `out` for the samples wanted[0..rows) (positions in the shuffle
// index, read once each); see the file comment. Nothing is promised of
// `out` when a fault is returned.
BatchResult gpt_batch(const IndexView& document_index, const IndexView& sample_index,
                      const IndexView& shuffle_index, const int64_t* wanted, int64_t rows,
                      const TokenSource& source, const BatchOptions& options, const BatchOut& out,
                      int threads);

// The flat cu_seqlens of the batch: each row's boundaries (cu_padded, whose
// row r holds segments[r] + 1 of them) shifted by r * S, the rows' shared
// ends written once: sum(segments) + 1 entries.
void flat_cu_seqlens(const int32_t* cu_padded, const int64_t* segments, int64_t rows,
                     int64_t sequence_length, int32_t* flat);

}  // namespace posembed
