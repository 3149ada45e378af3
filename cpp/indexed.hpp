// The token writes of a Megatron indexed dataset's .bin: one run of tokens
// with an end-of-document id before each of a sorted list of positions,
// written with vectored writes straight from the caller's memory (no copy
// of the tokens, no Python object per document).
#pragma once

#include <cstdint>

#include "positions.hpp"

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

// What copy_marked found; at most the first problem of each kind is kept.
struct CopyMarkedResult {
  int errno_value = 0;    // a read or a write failed (the system's error)
  int64_t short_at = -1;  // the input ended at this byte, before the range's last token
  bool bad_cuts = false;  // cuts not rising, or outside (first, last]
  int64_t stopped = -1;   // the first block with an id outside [low, high], or -1
};

// Copies tokens [first, last) of the file `in_fd` (token t at byte
// in_offset + t * size of `in`, byte-swapped when `swap`) to the file
// `out_fd`, converted to `out` (little-endian, as the format is), with the
// native item `mark` (of `out`'s size) before each token cuts[i] (rising,
// each in (first, last]; `last` puts it after the last token), the first
// one at byte `out_offset`.
//
// The range goes in blocks of `block` tokens, read and written on up to
// `threads` threads, each block through buffers of its own thread (cache
// sized, so that a token is read from memory once and written once). A
// block with an id below `low` or above `high` is not written: `stopped` is
// the first such block, and every block before it is written (blocks after
// it may be). The bytes written never depend on the thread count.
CopyMarkedResult copy_marked(int in_fd, int64_t in_offset, IntKind in, bool swap, int64_t first,
                             int64_t last, int64_t block, const int64_t* cuts, int64_t ncuts,
                             int out_fd, IntKind out, const uint8_t* mark, int64_t out_offset,
                             int64_t low, uint64_t high, int threads);

}  // namespace posembed
