// gather_backward: the gradient of a row lookup (gather) with respect to the
// table: a scatter-add of grad rows, in a fixed order.
#pragma once

#include <cstdint>

#include "half.hpp"

namespace posembed {

// out (length x cols) = the sum, over i with positions[i] == r, of grad row i,
// taken in increasing i (so the bits never depend on the thread count);
// rows no position names are zero, written only when `zero_unused` (a fresh
// np.zeros output already is). Positions must be in [0, length).
void gather_backward(const char* grad, int64_t cols, const int64_t* positions, int64_t count,
                     int64_t length, FloatKind kind, bool zero_unused, char* out);

}  // namespace posembed
