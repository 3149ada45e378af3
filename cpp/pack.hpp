// pack: packing documents into rows of a fixed capacity (best-fit decreasing,
// first-fit decreasing, or wrapped), and the cut of the rows into input ids,
// position ids that restart at every document, and labels.
#pragma once

#include <cstdint>
#include <vector>

namespace posembed {

enum class PackStrategy { bfd = 0, ffd = 1, wrapped = 2 };
// What becomes of a document longer than the capacity: cut into pieces of
// the capacity (the last one shorter), or truncated to its first tokens.
enum class PackSplit { pieces = 0, truncate = 1 };

// A plan: row r holds entries row_offsets[r]..row_offsets[r + 1], each a run
// of `length` tokens of `document` from its token `start`, at `offset` in the
// row, in the order they were placed.
struct PackPlan {
  std::vector<int64_t> row_offsets;
  std::vector<int64_t> document;
  std::vector<int64_t> start;
  std::vector<int64_t> length;
  std::vector<int64_t> offset;
};

// The plan of documents of lengths[0..n) (each >= 0) in rows of `capacity`
// tokens (1..2^31 - 1). Empty documents take no entry. For bfd and ffd the
// pieces are placed longest first (ties: document order, then piece order);
// bfd puts each in the row with the least room that holds it (ties: the row
// that came to that room first), ffd in the first row that holds it; a new
// row opens when none does. wrapped lays the documents end to end in their
// order and cuts every `capacity` tokens. Sequential and exact: the same
// lengths give the same plan whatever the thread count.
void pack_plan(const int64_t* lengths, int64_t n, int64_t capacity, PackStrategy strategy,
               PackSplit split, PackPlan* plan);

// What pack_cut or pack_unpack found wrong, or -1 everywhere.
struct PackCutFault {
  int64_t row = -1;  // the first row whose entries do not fit its documents or the row
};

// Where one per-token stream of the documents comes from: `memory` (items of
// `item` bytes, `nitems` of them), else the file `fd` (item t at byte
// file_offset + t * item, byte-swapped when `swap`; `nitems` of them), copied
// out of `map` (the file's first map_size bytes, see mapped.hpp) where given. The
// documents are at doc_offsets[0..ndocs] (in items; each value read once and
// checked against the source); `pad` (item bytes) fills a row's end.
struct PackSource {
  const uint8_t* memory = nullptr;
  int fd = -1;
  const uint8_t* map = nullptr;
  int64_t map_size = 0;
  int64_t file_offset = 0;
  bool swap = false;
  int64_t item = 1;
  int64_t nitems = 0;
  const int64_t* doc_offsets = nullptr;
  int64_t ndocs = 0;
  const uint8_t* pad = nullptr;
};

// What went wrong first in pack_rows (the lowest batch row with a problem).
enum class PackRowsFault : int {
  none,
  row,    // a: the row number, outside 0..nrows-1
  plan,   // a: the plan row whose entries do not fit its documents or the row
  ended,  // source a's file ended at byte b
  io,     // source a: errno b
  token,   // a token id (its bits as uint64 in b) the labels' dtype cannot hold
  length,  // source a's document b holds c items, not the plan's length
};

struct PackRowsResult {
  PackRowsFault fault = PackRowsFault::none;
  int64_t at = -1;  // the batch row
  int64_t a = 0, b = 0, c = 0;
};

// The sequences of the rows cut, row after row, a row's padding a sequence
// of its own, last in its row: their lengths, documents (-1 for padding) and
// first tokens, each row's first sequence (row_segments, rows + 1) and the
// prefix sums of the lengths over the rows flattened (cu_seqlens).
struct PackSegments {
  std::vector<int32_t> seq_lengths;
  std::vector<int64_t> row_segments;
  std::vector<int64_t> documents;
  std::vector<int64_t> starts;
  std::vector<int32_t> cu_seqlens;
};

// Rows wanted[0..nwanted) of a plan (of nrows rows; any order, repeats
// allowed, each read once) cut from `tokens` (T items) and `columns`: ids
// (nwanted x capacity, T), positions and, when labels is not null, labels
// (nwanted x capacity, P), and one (nwanted x capacity) block of each
// column's items in column_out. A row's entries are copied in order, only
// the tokens and items they hold being read (positional reads on the
// threads for a file); positions count position_start.. from each entry's
// first token, labels are the tokens but `separator` at each entry's first
// token; the rest of a row is each source's pad, positions position_start..
// from its first pad, labels `ignore`. Rows are spread over threads, each
// output row depending on its plan row alone: the same results for any
// thread count. Every plan value is read once and checked, and every
// document read must hold document_lengths[d] items in each source (the
// plan's lengths, ndocs of them); on a fault the outputs are undefined.
// Without one, `segments` receives the rows' sequences.
template <class T, class P>
PackRowsResult pack_rows(const PackSource& tokens, const std::vector<PackSource>& columns,
                         const int64_t* wanted, int64_t nwanted, const int64_t* row_offsets,
                         int64_t nrows, int64_t nentries, const int64_t* document,
                         const int64_t* start, const int64_t* length,
                         const int64_t* document_lengths, int64_t ndocs, int64_t capacity,
                         P position_start, P separator, P ignore, T* ids, P* positions,
                         P* labels, const std::vector<uint8_t*>& column_out,
                         PackSegments* segments);

// Per-token values of a plan's rows (rows x capacity items of `item` bytes,
// values[0..rows)) back in document order: out[placed[d] + start + j] =
// values[row, offset + j] for every entry (document d, start, length,
// offset) of the rows, placed[d] being where document d's placed tokens
// begin in out (placed[ndocs] = out_tokens). Every plan value is read once
// and checked; a bad one ends with its row in the fault.
PackCutFault pack_unpack(const uint8_t* values, int64_t item, const int64_t* row_offsets,
                         int64_t nentries, const int64_t* document, const int64_t* start,
                         const int64_t* length, const int64_t* offset, int64_t rows,
                         int64_t capacity, const int64_t* placed, int64_t ndocs, uint8_t* out);

}  // namespace posembed
