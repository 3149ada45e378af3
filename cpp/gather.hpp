// gather: out[i, :] = table[positions[i], :], the lookup of a learned position
// embedding. Rows are copied as bytes, so any fixed-size element type works.
#pragma once

#include <cstdint>
#include <string>

namespace posembed {

enum class IndexMode : int { raise = 0, clip = 1, wrap = 2 };

// The integer type of a positions array.
enum class IntKind : int { i8, i16, i32, i64, u8, u16, u32, u64 };

// A 2-D table viewed through byte strides (either may be negative).
struct TableView {
  const char* data;  // address of element [0, 0]
  int64_t rows;
  int64_t cols;
  int64_t row_stride;
  int64_t col_stride;
  int64_t itemsize;
};

// A C-contiguous array of `count` positions of type `kind`.
struct PositionsView {
  const void* data;
  IntKind kind;
  int64_t count;
};

// Flat index of the first position outside [0, rows), or -1 if there is none.
int64_t first_invalid_position(const PositionsView& pos, int64_t rows);
// How many positions lie outside [0, rows).
int64_t count_invalid_positions(const PositionsView& pos, int64_t rows);
// The value of positions[index], widened to a decimal string.
std::string position_to_string(const PositionsView& pos, int64_t index);

// Writes out[i*cols*itemsize ...] for every position and returns -1; or, when
// some position is invalid for `mode` (any out-of-range one in raise mode,
// every one when the table has no rows), writes nothing and returns the flat
// index of the first such position. `out` is C-contiguous (count, cols).
// `fresh_out`: out was just allocated (see use_streaming).
int64_t gather(const TableView& table, const PositionsView& pos, IndexMode mode, char* out,
               bool fresh_out);

}  // namespace posembed
