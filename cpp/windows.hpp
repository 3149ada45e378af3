// windows: overlapping chunks of a token stream (sliding windows), per
// document of a CSR corpus, never crossing a document boundary.
#pragma once

#include <cstdint>

namespace posembed {

enum class Tail : int {
  pad = 0,    // starts k * step; the last window reaches the end, padded
  shift = 1,  // same count; the last window moved back to end at the end
  drop = 2,   // full windows only (may leave the tail uncovered)
};

// Windows of a document of n tokens.
int64_t window_count(int64_t n, int64_t size, int64_t step, Tail tail);
// Start (within the document) of window k of the `count` windows of a document of n tokens.
int64_t window_start(int64_t k, int64_t count, int64_t n, int64_t size, int64_t step, Tail tail);

// win_offsets[k] = first window of document k (ndocs + 1 entries).
void window_offsets(const int64_t* doc_offsets, int64_t ndocs, int64_t size, int64_t step,
                    Tail tail, int64_t* win_offsets);

struct WindowsOut {
  char* tokens;        // (n, size) elements of itemsize bytes
  int64_t* starts;     // (n,)
  int64_t* lengths;    // (n,)
  int64_t* documents;  // (n,)
};

// Fills every window; pad is one element (itemsize bytes) for unused slots.
void fill_windows(const char* tokens, int64_t itemsize, const int64_t* doc_offsets, int64_t ndocs,
                  const int64_t* win_offsets, int64_t size, int64_t step, Tail tail,
                  const char* pad, const WindowsOut& out);

// Which window owns a token that several windows hold.
enum class OwnerRule : int {
  first = 0,   // the earliest window containing the token
  center = 1,  // BERT's max context: the window maximising min(left context,
               // right context) + 0.01 * window length, the earliest on ties;
               // compared exactly as 100 * min + length
};

// owner: for every input token, exactly one (window, slot) is marked in
// own (n, size), by `rule`.
void window_owner(const int64_t* doc_offsets, int64_t ndocs, const int64_t* win_offsets,
                  const int64_t* starts, const int64_t* lengths, int64_t size, OwnerRule rule,
                  bool* own);

enum class Reduce : int { mean = 0, sum = 1, max = 2, owned = 3 };

// stitch: per-window values (n, size, f) back to per-token rows (N, f) of the
// same type T (float, double, int64_t or uint64_t). Each token's row is
// reduced over the slots that hold it, in window order: mean, sum, max (NaN
// wins, as numpy.maximum), or `owned` (the slot own marks). Tokens no slot
// holds get `fill`. Within each document, window starts and ends must not
// decrease (as windows() makes them). Integer sums are exact: returns the
// first token whose sum lies outside T's range (its row then holds the sum
// modulo 2^64), or -1 when every sum fits.
template <class T>
int64_t stitch(const T* values, int64_t f, const int64_t* doc_offsets, int64_t ndocs,
            const int64_t* win_offsets, const int64_t* starts, const int64_t* lengths,
            int64_t size, Reduce reduce, const bool* own, T fill, T* out);

}  // namespace posembed
