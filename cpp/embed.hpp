// embed: out[r, :] = dropout(token_table[ids[r], :] + pos_table[positions[r], :]),
// the forward pass of token + learned position embeddings with inverted
// dropout, in one pass; dropout_mask: the mask it applies. (The backward
// pass of the lookups is gather_backward.hpp.)
//
// The dropout mask is counter-based: element e of the flat output keeps its
// value when uniform_bits(key, e) >= threshold, where
//   key = mix(seed), h(i) = mix(key + (i + 1) * 0x9E3779B97F4A7C15) (mod 2^64),
//   uniform_bits(key, e) = low 32 bits of h(e / 2) for even e, high 32 bits for odd e,
// and mix is SplitMix64's finaliser. So a seed gives the same mask for any
// thread count, SIMD level or split of the work.
#pragma once

#include <cstdint>

#include "half.hpp"
#include "interpolate.hpp"

namespace posembed {

uint64_t dropout_key(uint64_t seed);

// u[k] = uniform_bits(key, first + k) for k in [0, n).
void uniform_bits(uint64_t key, int64_t first, int64_t n, uint32_t* u);

// mask[e] = uniform_bits(key, e) >= threshold for e in [0, n).
void dropout_mask(uint64_t key, uint32_t threshold, int64_t n, bool* mask);

struct DropoutSpec {
  bool active;         // false: exact addition
  uint64_t key;        // dropout_key(seed)
  uint32_t threshold;  // floor(p * 2^32)
  double scale;        // 1 / (1 - p), rounded to the compute type by the kernel
};

// `rows` rows of out (rows x cols, C-contiguous, storage type of `kind`).
// Token row r is ids[r]; its position row is positions[r] when positions is
// not null, else offset + r % period. The caller checks every id and position
// first; reads are clamped all the same, so ids another thread rewrites
// meanwhile cannot take the kernel out of the tables.
void embed(const RowsView& tokens, const int64_t* ids, int64_t rows, const RowsView& pos,
           const int64_t* positions, int64_t offset, int64_t period, FloatKind kind,
           const DropoutSpec& dropout, char* out);

}  // namespace posembed
