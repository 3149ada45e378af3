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

// `rows` rows of out (rows x cols, C-contiguous, storage type of `kind`).
// Token row r is ids[r]; its position row is positions[r % period] when
// positions is not null (period = T repeats one row of positions for every
// sequence of a batch), else offset + r % period. The caller checks every id and position
// first; reads are clamped all the same, so ids another thread rewrites
// meanwhile cannot take the kernel out of the tables.
void embed(const RowsView& tokens, const int64_t* ids, int64_t rows, const RowsView& pos,
           const int64_t* positions, int64_t offset, int64_t period, FloatKind kind,
           const DropoutSpec& dropout, char* out);

}  // namespace posembed
