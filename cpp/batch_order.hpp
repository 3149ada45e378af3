// The global sample order of a batch order: global position p is sample
// perm(seed, p / N)[p % N], or p % N without shuffling. perm is a seeded
// bijection of 0..N-1 per epoch, computed one element at a time (a Feistel
// network over the smallest power of two >= N, at least 4, walked again
// while it lands at N or past it), so no permutation is ever stored and a run
// resumes at any position in O(1).
#pragma once

#include <cstdint>

namespace posembed {

// out[r * width + t] = sample at position first + r * stride + t, for r in
// [0, rows), t in [0, width). Positions are >= 0 and first + (rows - 1) *
// stride + width <= 2^62 (the caller checks). Results do not depend on the
// thread count.
void batch_order_rows(int64_t* out, int64_t rows, int64_t width, int64_t first, int64_t stride,
                      int64_t n, uint64_t seed, bool shuffle);

// out[k] = sample at position positions[k] (each in 0..2^62 - 1, checked by
// the caller on its own copy), k in [0, count).
void batch_order_samples(const int64_t* positions, int64_t* out, int64_t count, int64_t n,
                         uint64_t seed, bool shuffle);

}  // namespace posembed
