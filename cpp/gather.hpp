// gather: out[i, :] = table[positions[i], :], the lookup of a learned position
// embedding. Rows are copied as bytes, so any fixed-size element type works.
#pragma once

#include <cstdint>

#include "positions.hpp"

namespace posembed {

enum class IndexMode : int { raise = 0, clip = 1, wrap = 2 };

// A 2-D table viewed through byte strides (either may be negative).
struct TableView {
  const char* data;  // address of element [0, 0]
  int64_t rows;
  int64_t cols;
  int64_t row_stride;
  int64_t col_stride;
  int64_t itemsize;
};

// Writes out[i*cols*itemsize ...] for every position and returns nothing
// found; or, when some position is invalid for `mode` (any out-of-range one
// in raise mode, every one when the table has no rows), writes nothing and
// returns the first such position and their count. `out` is C-contiguous
// (count, cols). `out_just_allocated`: the caller allocated out for this call,
// so streaming stores would gain nothing (see use_streaming).
OutOfRange gather(const TableView& table, const PositionsView& pos, IndexMode mode, char* out,
                  bool out_just_allocated);

}  // namespace posembed
