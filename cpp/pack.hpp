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

// What pack_cut found wrong in the plan it was given, or -1 everywhere.
struct PackCutFault {
  int64_t row = -1;  // the first row whose entries do not fit its documents or the row
};

// Rows r0..r1 of a plan cut from tokens[0..ntokens) (documents at
// doc_offsets[0..ndocs], checked by the caller): ids (rows x capacity, T),
// positions and, when labels is not null, labels (rows x capacity, P). A
// row's entries are copied in order, positions 0..length-1 each, labels the
// tokens but `ignore` at each entry's first token; the rest of a row is
// `pad`, positions 0.. from its first pad, labels `ignore`. Every plan value
// is read once and checked; a bad one ends with that row in the fault, the
// outputs then undefined.
template <class T, class P>
PackCutFault pack_cut(const T* tokens, int64_t ntokens, const int64_t* doc_offsets, int64_t ndocs,
                      const int64_t* row_offsets, int64_t nentries, const int64_t* document,
                      const int64_t* start, const int64_t* length, int64_t r0, int64_t r1,
                      int64_t capacity, T pad, P ignore, T* ids, P* positions, P* labels);

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
