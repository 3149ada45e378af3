// embed: out[r, :] = dropout(token_table[ids[r], :] + pos_table[positions[r], :]),
// the forward pass of token + learned position embeddings with inverted
// dropout, in one pass; dropout_mask: the mask it applies. (The backward
// pass of the lookups is gather_backward.hpp.)
//
// The dropout mask is counter-based: element e of the flat output keeps its
// value when its 32 random bits (random.hpp, a function of seed and e only)
// are at least threshold = floor(p * 2^32). So a seed gives the same mask for
// any thread count, SIMD level or split of the work.
#pragma once

#include <cstdint>

#include "half.hpp"
#include "interpolate.hpp"
#include "random.hpp"

namespace posembed {

// mask[e] = random bits of e >= threshold, for e in [0, n).
void dropout_mask(const RandomKey& key, uint32_t threshold, int64_t n, bool* mask);

struct DropoutSpec {
  bool active;         // false: exact addition
  RandomKey key;       // random_key(seed)
  uint32_t threshold;  // floor(p * 2^32)
  double scale;        // 1 / (1 - p), rounded to the compute type by the kernel
  int64_t first_row;   // out's row 0 is this row of the whole output (the mask's
                       // counter): a block of a larger batch gets the whole's mask
};

// Where output row r, token r % tokens of sequence r / tokens, takes its
// position row: the caller's positions broadcast to the ids' shape (a step of
// 0 repeats them, as NumPy's broadcasting does), or offset + r % tokens when
// there are none.
struct PositionRows {
  const int64_t* given;   // null: offset + r % tokens
  int64_t offset;
  int64_t tokens;         // tokens per sequence, >= 1
  int64_t sequence_step;  // given's step from one sequence to the next: 0 or its row length
  int64_t token_step;     // and from one token to the next: 0 or 1
  int64_t of(int64_t r) const {
    const int64_t token = r % tokens;
    return given ? given[r / tokens * sequence_step + token * token_step] : offset + token;
  }
};

// `rows` rows of out (rows x cols, C-contiguous, storage type of `kind`):
// token row ids[r] plus position row positions.of(r). The caller checks every
// id and position first; reads are clamped all the same, so ids another
// thread rewrites meanwhile cannot take the kernel out of the tables.
void embed(const RowsView& tokens, const int64_t* ids, int64_t rows, const RowsView& pos,
           const PositionRows& positions, FloatKind kind, const DropoutSpec& dropout, char* out);

}  // namespace posembed
