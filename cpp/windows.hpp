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

// The window layout: where every window lies, from the document lengths
// alone. win_offsets[k] = first window of document k (ndocs + 1 entries,
// the last one the number of windows): the one place windows are counted.
void window_offsets(const int64_t* doc_offsets, int64_t ndocs, int64_t size, int64_t step,
                    Tail tail, int64_t* win_offsets);

struct Layout {
  int64_t* starts;     // start of each window within its document
  int64_t* lengths;    // the document's tokens in it (the rest is padding)
  int64_t* documents;  // its document
};

// The layout of windows [begin, end) (end - begin entries of each array in
// out), from the window offsets of documents [doc_base, doc_base + ndocs)
// of a corpus: doc_offsets and win_offsets point at document doc_base's
// entry, and out.documents counts from doc_base. Requires win_offsets as
// window_offsets() makes them for these documents, and windows [begin, end)
// among theirs.
void window_layout(const int64_t* doc_offsets, const int64_t* win_offsets, int64_t ndocs,
                   int64_t doc_base, int64_t size, int64_t step, Tail tail, int64_t begin,
                   int64_t end, const Layout& out);

struct ConstLayout {
  const int64_t* starts;
  const int64_t* lengths;
  const int64_t* documents;
  int64_t count;  // windows
};

// A run of a corpus's tokens: tokens [first, first + count) of the whole
// corpus, `itemsize` bytes each.
struct TokenSpan {
  const char* data;
  int64_t itemsize;
  int64_t first;
  int64_t count;
};

// The first window of `layout` that is not inside its document (a document
// outside 0..ndocs-1, a negative start, a length outside 0..size, an end past
// the document's) or whose tokens are not inside `tokens`; -1 when every one
// is. doc_offsets may be any values: nothing is read outside the arrays and
// no arithmetic overflows.
int64_t first_misplaced_window(const TokenSpan& tokens, const int64_t* doc_offsets, int64_t ndocs,
                               const ConstLayout& layout, int64_t size);

// Cuts the windows of `layout` (a whole layout or any range of one) from
// `tokens` into rows (count, size); pad is one element (itemsize bytes) for
// the slots past each window's length. Every window must pass
// first_misplaced_window. `stream`: the rows are written with streaming
// stores (see use_streaming in runtime.hpp), the same bytes.
void fill_windows(const TokenSpan& tokens, const int64_t* doc_offsets, const ConstLayout& layout,
                  int64_t size, const char* pad, char* rows, bool stream);

// What fill_windows_to_file met: errno_value != 0, a read or a write that
// failed (the system's error); short_at >= 0, the input ended at that byte.
struct FileCutResult {
  int errno_value = 0;
  int64_t short_at = -1;
};

// fill_windows from a token file to a file: the windows of `layout` cut
// from the file `in_fd` (corpus token t at byte in_offset + t * itemsize,
// byte-swapped when `swap`) and written as rows (count, size) to `out_fd`
// from byte `out_offset`. Each of up to `threads` threads reads, cuts and
// writes a block of rows (about `block_bytes`, one row at least) at a time
// through buffers of its own: sized to stay in its core's cache, a token
// leaves memory once and returns once. Every window must pass
// first_misplaced_window for the file's tokens.
FileCutResult fill_windows_to_file(int in_fd, int64_t in_offset, int64_t itemsize, bool swap,
                                   const int64_t* doc_offsets, const ConstLayout& layout,
                                   int64_t size, const char* pad, int out_fd, int64_t out_offset,
                                   int64_t block_bytes, int threads);

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

// How stitch combines the slots that hold the same token: every slot in
// window order (mean, sum, max), or only the owner's (first, center: the
// windows OwnerRule names).
enum class Reduce : int { mean = 0, sum = 1, max = 2, first = 3, center = 4 };

// stitch: per-window values (n, size, f) back to per-token rows (N, f) of the
// same type T (float, double, int64_t or uint64_t). Each token's row is
// reduced over the slots that hold it, in window order: mean, sum, max (NaN
// wins, as numpy.maximum), or taken from the slot of the window that owns the
// token (first, center: as window_owner marks it). Tokens no slot holds get
// `fill`. Within each document, window starts and ends must not
// decrease (as windows() makes them). Integer sums are exact: returns the
// first token whose sum lies outside T's range (its row then holds the sum
// modulo 2^64), or -1 when every sum fits.
template <class T>
int64_t stitch(const T* values, int64_t f, const int64_t* doc_offsets, int64_t ndocs,
            const int64_t* win_offsets, const int64_t* starts, const int64_t* lengths,
            int64_t size, Reduce reduce, T fill, T* out);

}  // namespace posembed
