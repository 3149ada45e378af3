// Integer index arrays as the lookup kernels take them (gather's positions,
// embed's token ids and positions, gather_backward's positions): their eight
// element types, the range scan every lookup runs before it writes anything,
// and their widening to int64.
#pragma once

#include <cstdint>
#include <type_traits>

namespace posembed {

// The integer type of a positions array.
enum class IntKind : int { i8, i16, i32, i64, u8, u16, u32, u64 };

// A C-contiguous array of `count` positions of type `kind`.
struct PositionsView {
  const void* data;
  IntKind kind;
  int64_t count;
};

// What a range scan found: the flat index of the first value outside
// [0, rows) (-1 when there is none) and how many values are outside.
struct OutOfRange {
  int64_t first;
  int64_t count;
  bool found() const { return first >= 0; }
};

// One branch-free pass by blocks (it vectorises; large arrays get threads),
// whose first hit does not depend on the thread count; the count is taken
// only when something is out of range.
OutOfRange find_out_of_range(const PositionsView& pos, int64_t rows);

// positions[0..count) as int64 into out: exact for every value the scan
// above accepted (a uint64 of 2^63 or more would wrap negative).
void widen_positions(const PositionsView& pos, int64_t* out);

// Calls f(typed pointer) for the C++ type behind a positions array.
template <class F>
auto with_positions(const PositionsView& p, F&& f) {
  switch (p.kind) {
    case IntKind::i8: return f(static_cast<const int8_t*>(p.data));
    case IntKind::i16: return f(static_cast<const int16_t*>(p.data));
    case IntKind::i32: return f(static_cast<const int32_t*>(p.data));
    case IntKind::i64: return f(static_cast<const int64_t*>(p.data));
    case IntKind::u8: return f(static_cast<const uint8_t*>(p.data));
    case IntKind::u16: return f(static_cast<const uint16_t*>(p.data));
    case IntKind::u32: return f(static_cast<const uint32_t*>(p.data));
    case IntKind::u64: break;
  }
  return f(static_cast<const uint64_t*>(p.data));
}

// Signed values map to uint64 so that negatives become huge: one unsigned
// compare against the row count catches both ends (rows <= 2^63 always).
template <class T>
inline uint64_t as_u64(T v) {
  if constexpr (std::is_signed_v<T>) {
    return static_cast<uint64_t>(static_cast<int64_t>(v));
  } else {
    return static_cast<uint64_t>(v);
  }
}

}  // namespace posembed
