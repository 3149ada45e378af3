// The token writes of a Megatron indexed dataset's .bin: one run of tokens
// with an end-of-document id before each of a sorted list of positions,
// written with vectored writes straight from the caller's memory (no copy
// of the tokens, no Python object per document).
#pragma once

#include <cstdint>

namespace posembed {

// What write_marked found wrong; errno_value != 0 is the system's error.
struct MarkedWriteResult {
  int errno_value = 0;
  int64_t bad_cut = -1;  // the first cut out of order or out of 0..count, or -1
};

// Writes `count` items of `item` bytes at `data`, with the `item` bytes at
// `mark` before item cuts[i] for each i (cuts sorted, each in 0..count), to
// the file `fd` at byte `offset`; partial writes are resumed and EINTR
// retried. Each cut is read once. Nothing is written when a cut is bad.
MarkedWriteResult write_marked(int fd, const uint8_t* data, int64_t count, int64_t item,
                               const int64_t* cuts, int64_t ncuts, const uint8_t* mark,
                               int64_t offset);

}  // namespace posembed
