// Bindings of the windows family: window_layout (where the windows of a
// corpus lie), fill_windows (their tokens, cut from a run of the corpus),
// window_owner (which slot owns each token) and stitch (per-window values
// back to per-token values).
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <type_traits>
#include <vector>

#include "bind.hpp"
#include "runtime.hpp"
#include "windows.hpp"

namespace posembed::bind {
namespace {

using namespace pybind11::literals;

// A private copy of a caller's array.
std::vector<int64_t> copy_of(const I64& a) {
  return std::vector<int64_t>(a.data(), a.data() + a.size());
}

// doc_offsets[k..k+1] must not decrease from a non-negative start: then every
// document length is >= 0 and no difference overflows.
void check_offsets(const int64_t* offs, int64_t from, int64_t to) {
  if (offs[from] < 0) throw py::value_error("window_layout: offsets must not be negative");
  for (int64_t k = from; k < to; ++k) {
    if (offs[k + 1] < offs[k]) throw py::value_error("window_layout: offsets must not decrease");
  }
}

// Returns (window offsets, starts, lengths, documents) of windows [begin,
// end) (end -1: to the last). Without win_offsets they are counted here, for
// every document; with them (window_offsets as an earlier call returned them:
// a stream takes its windows range by range) the documents the range touches
// are checked against them, so that a wrong one cannot send the kernel past
// the arrays, and the others are never read. The offsets (and window offsets)
// the kernel reads are private copies, checked once: another thread may
// rewrite the caller's while the GIL is released.
py::tuple window_layout(const I64& doc_offsets, int64_t size, int64_t step, Tail tail,
                        const py::object& win_offsets, int64_t begin, int64_t end) {
  member(tail, Tail::drop);
  if (doc_offsets.ndim() != 1 || doc_offsets.size() < 1 || size < 1 || step < 1 || step > size) {
    throw py::value_error("window_layout: inconsistent arguments");
  }
  const auto ndocs = static_cast<int64_t>(doc_offsets.size()) - 1;
  I64 win;
  std::vector<int64_t> offs, wins;  // of documents [d0, d1]: d1 - d0 + 2 entries
  int64_t d0 = 0, d1 = ndocs - 1;
  if (win_offsets.is_none()) {
    offs = copy_of(doc_offsets);
    check_offsets(offs.data(), 0, ndocs);
    win = I64(ndocs + 1);
    {
      py::gil_scoped_release nogil;
      window_offsets(offs.data(), ndocs, size, step, tail, win.mutable_data());
    }
    wins.assign(win.data(), win.data() + ndocs + 1);  // ours, but returned to the caller
  } else {
    win = win_offsets.cast<I64>();
    if (win.ndim() != 1 || win.size() != doc_offsets.size() || win.data()[0] != 0) {
      throw py::value_error("window_layout: window offsets do not match the documents");
    }
  }
  const int64_t total = win_offsets.is_none() ? wins.back() : win.data()[ndocs];
  if (end == -1) end = total;
  if (begin < 0 || begin > end || end > total) {
    throw py::value_error("window_layout: windows [begin, end) out of range");
  }
  if (!win_offsets.is_none()) {
    // The documents [d0, d1] that hold windows [begin, end), found in the
    // caller's window offsets, then copied with their offsets and checked.
    const int64_t* caller = win.data();
    d0 = 0;
    d1 = -1;
    if (begin < end) {
      d0 = std::upper_bound(caller, caller + ndocs + 1, begin) - caller - 1;
      d1 = std::upper_bound(caller, caller + ndocs + 1, end - 1) - caller - 1;
      if (d0 < 0 || d1 < d0 || d1 >= ndocs) {
        throw py::value_error("window_layout: window offsets do not match the documents");
      }
      offs.assign(doc_offsets.data() + d0, doc_offsets.data() + d1 + 2);
      wins.assign(caller + d0, caller + d1 + 2);
      check_offsets(offs.data(), 0, d1 - d0 + 1);
      bool fits = wins.front() <= begin && wins.back() >= end;
      for (size_t k = 0; fits && k + 1 < wins.size(); ++k) {
        fits = wins[k + 1] - wins[k] == window_count(offs[k + 1] - offs[k], size, step, tail);
      }
      if (!fits) {
        throw py::value_error("window_layout: window offsets do not match the documents");
      }
    }
  }
  const int64_t count = end - begin;
  I64 starts(count), lengths(count), documents(count);
  const Layout out{starts.mutable_data(), lengths.mutable_data(), documents.mutable_data()};
  if (count > 0) {
    py::gil_scoped_release nogil;
    posembed::window_layout(offs.data(), wins.data(), d1 - d0 + 1, d0, size, step, tail, begin,
                            end, out);
  }
  return py::make_tuple(win, starts, lengths, documents);
}

// A layout of windows and the offsets of the documents they name, copied
// from a caller's arrays: they may be the caller's own, which another thread
// can rewrite while the GIL is released, so the kernels check and cut from
// these copies (what was checked is what they use). Only the offsets of the
// documents the windows name are copied (a stream cuts a batch of a large
// corpus at a time), the windows' document indices rebased to the copy.
struct CopiedLayout {
  std::vector<int64_t> starts, lengths, documents, offsets;
  int64_t ndocs = 0;  // documents in the copy of the offsets
  ConstLayout view() const {
    return {starts.data(), lengths.data(), documents.data(),
            static_cast<int64_t>(starts.size())};
  }
};

CopiedLayout copy_layout(const I64& doc_offsets, const I64& starts, const I64& lengths,
                         const I64& documents) {
  const auto count = static_cast<int64_t>(starts.size());
  const auto ndocs = static_cast<int64_t>(doc_offsets.size()) - 1;
  CopiedLayout c;
  c.starts.assign(starts.data(), starts.data() + count);
  c.lengths.assign(lengths.data(), lengths.data() + count);
  c.documents.assign(documents.data(), documents.data() + count);
  int64_t first_doc = 0;
  int64_t last_doc = -1;
  if (count > 0) {
    const auto [lo, hi] = std::minmax_element(c.documents.begin(), c.documents.end());
    first_doc = std::clamp<int64_t>(*lo, 0, std::max<int64_t>(ndocs - 1, 0));
    last_doc = std::clamp<int64_t>(*hi, first_doc, std::max<int64_t>(ndocs - 1, 0));
  }
  // A document outside 0..ndocs-1 stays outside the copy's range after the
  // shift, so the kernel's check still refuses it.
  c.ndocs = ndocs > 0 ? last_doc - first_doc + 1 : 0;
  c.offsets.assign(doc_offsets.data() + first_doc,
                   doc_offsets.data() + first_doc + c.ndocs + (ndocs > 0 ? 1 : 0));
  for (auto& d : c.documents) d = (d < first_doc || d > last_doc) ? -1 : d - first_doc;
  return c;
}

// A ValueError naming window `bad` of the caller's layout.
[[noreturn]] void misplaced(int64_t bad, const I64& documents, const CopiedLayout& c) {
  const auto at = static_cast<size_t>(bad);
  PyErr_Format(PyExc_ValueError,
               "layout: window %lld (document %lld, start %lld, length %lld) does not lie "
               "inside its document and the tokens given",
               static_cast<long long>(bad), static_cast<long long>(documents.data()[bad]),
               static_cast<long long>(c.starts[at]), static_cast<long long>(c.lengths[at]));
  throw py::error_already_set();
}

bool layout_arrays_fit(const I64& doc_offsets, const I64& starts, const I64& lengths,
                       const I64& documents, int64_t size) {
  return doc_offsets.ndim() == 1 && doc_offsets.size() >= 1 && starts.ndim() == 1 &&
         lengths.size() == starts.size() && documents.size() == starts.size() && size >= 1;
}

// tokens: 1-D C-contiguous, tokens [token_start, token_start + len) of the
// corpus; the layout: any windows of the corpus of doc_offsets (checked
// against both before anything is written); pad: one element of the tokens'
// dtype.
py::array fill_windows(const py::array& tokens, int64_t token_start, const I64& doc_offsets,
                       const I64& starts, const I64& lengths, const I64& documents, int64_t size,
                       const py::array& pad, const py::object& out_obj) {
  if (tokens.ndim() != 1 || !c_contiguous(tokens) ||
      !layout_arrays_fit(doc_offsets, starts, lengths, documents, size) || pad.size() != 1 ||
      pad.itemsize() != tokens.itemsize() || token_start < 0) {
    throw py::value_error("fill_windows: inconsistent arguments");
  }
  const TokenSpan span{static_cast<const char*>(tokens.data()),
                       static_cast<int64_t>(tokens.itemsize()), token_start,
                       static_cast<int64_t>(tokens.size())};
  const CopiedLayout copied = copy_layout(doc_offsets, starts, lengths, documents);
  const ConstLayout layout = copied.view();
  int64_t bad = -1;
  {
    py::gil_scoped_release nogil;
    bad = first_misplaced_window(span, copied.offsets.data(), copied.ndocs, layout, size);
  }
  if (bad >= 0) misplaced(bad, documents, copied);
  py::array out = output_array(out_obj, tokens.dtype(), {layout.count, size});
  const auto* pv = static_cast<const char*>(pad.data());
  char* rows = static_cast<char*>(out.mutable_data());
  const bool stream = use_streaming(layout.count * size * span.itemsize, out_obj.is_none());
  {
    py::gil_scoped_release nogil;
    posembed::fill_windows(span, copied.offsets.data(), layout, size, pv, rows, stream);
  }
  return out;
}

// The windows of the layout cut from the token file `in_fd` (corpus token t
// of `itemsize` bytes at byte in_offset + t * itemsize, token_count of them;
// byte-swapped when `swap`) and written as rows to `out_fd` from byte
// `out_offset`, a block of about `block_bytes` of rows at a time on each
// thread. Returns -1, or the byte at which the input ended before a
// window's last token.
int64_t fill_windows_to_file(int in_fd, int64_t in_offset, int64_t itemsize, bool swap,
                             int64_t token_count, const I64& doc_offsets, const I64& starts,
                             const I64& lengths, const I64& documents, int64_t size,
                             const py::array& pad, int out_fd, int64_t out_offset,
                             int64_t block_bytes) {
  if (!layout_arrays_fit(doc_offsets, starts, lengths, documents, size) || pad.size() != 1 ||
      pad.itemsize() != itemsize || in_offset < 0 || out_offset < 0 || token_count < 0 ||
      block_bytes < 1 || (itemsize != 1 && itemsize != 2 && itemsize != 4 && itemsize != 8)) {
    throw py::value_error("fill_windows_to_file: inconsistent arguments");
  }
  const CopiedLayout copied = copy_layout(doc_offsets, starts, lengths, documents);
  const ConstLayout layout = copied.view();
  char pv[8] = {};
  std::memcpy(pv, pad.data(), static_cast<size_t>(itemsize));
  const TokenSpan span{nullptr, itemsize, 0, token_count};
  int64_t bad = -1;
  FileCutResult result;
  {
    py::gil_scoped_release nogil;
    bad = first_misplaced_window(span, copied.offsets.data(), copied.ndocs, layout, size);
    if (bad < 0) {
      result = posembed::fill_windows_to_file(in_fd, in_offset, itemsize, swap,
                                              copied.offsets.data(), layout, size, pv, out_fd,
                                              out_offset, block_bytes, get_num_threads());
    }
  }
  if (bad >= 0) misplaced(bad, documents, copied);
  if (result.errno_value != 0) {
    errno = result.errno_value;
    PyErr_SetFromErrno(PyExc_OSError);
    throw py::error_already_set();
  }
  return result.short_at;
}

// A layout of windows as the owner and stitch kernels read it: private copies
// of the caller's arrays, checked once. Another thread may rewrite the
// caller's arrays while the GIL is released (or while a NumPy copy it started
// runs), so the kernels never read them: what was checked is what they use.
struct CheckedWindows {
  std::vector<int64_t> doc_offsets;  // ndocs + 1, from 0, never decreasing
  std::vector<int64_t> starts;       // per window, inside its document
  std::vector<int64_t> lengths;      // per window, 0..size, ending inside its document
  std::vector<int64_t> win;          // first window of each document (ndocs + 1)
  int64_t ndocs() const { return static_cast<int64_t>(doc_offsets.size()) - 1; }
  int64_t count() const { return static_cast<int64_t>(starts.size()); }
};

// Refused unless the windows lie in document order, each inside its document
// and none ending before the previous one in the same document. Compared
// without overflow: any int64 values are refused, never wrapped.
CheckedWindows checked_windows(const I64& doc_offsets, const I64& starts, const I64& lengths,
                               const I64& documents, int64_t size) {
  if (doc_offsets.size() < 1 || lengths.size() != starts.size() ||
      documents.size() != starts.size() || size < 1) {
    throw py::value_error("windows: inconsistent window arrays");
  }
  CheckedWindows w{copy_of(doc_offsets), copy_of(starts), copy_of(lengths), {}};
  const std::vector<int64_t> docs = copy_of(documents);
  const int64_t ndocs = w.ndocs();
  const int64_t* offs = w.doc_offsets.data();
  if (offs[0] != 0) throw py::value_error("windows: offsets must start at 0");
  for (int64_t k = 0; k < ndocs; ++k) {
    if (offs[k + 1] < offs[k]) throw py::value_error("windows: offsets must not decrease");
  }
  w.win.assign(static_cast<size_t>(ndocs + 1), 0);
  for (int64_t i = 0; i < w.count(); ++i) {
    const auto at = static_cast<size_t>(i);
    const int64_t d = docs[at], start = w.starts[at], length = w.lengths[at];
    const bool placed = d >= 0 && d < ndocs && (i == 0 || d >= docs[at - 1]) && start >= 0 &&
                        length >= 0 && length <= size &&
                        start <= (offs[d + 1] - offs[d]) - length;  // no overflow: all >= 0
    const bool ordered = !placed || i == 0 || d != docs[at - 1] ||
                         (start >= w.starts[at - 1] &&
                          start + length >= w.starts[at - 1] + w.lengths[at - 1]);
    if (!placed || !ordered) {
      throw py::value_error("windows: window arrays do not describe these documents");
    }
    ++w.win[static_cast<size_t>(d + 1)];
  }
  for (int64_t k = 0; k < ndocs; ++k) {
    w.win[static_cast<size_t>(k + 1)] += w.win[static_cast<size_t>(k)];
  }
  return w;
}

py::array window_owner(const I64& doc_offsets, const I64& starts, const I64& lengths,
                       const I64& documents, int64_t size, OwnerRule rule) {
  member(rule, OwnerRule::center);
  const CheckedWindows w = checked_windows(doc_offsets, starts, lengths, documents, size);
  py::array_t<bool> own(Shape{w.count(), size});
  bool* dst = own.mutable_data();
  {
    py::gil_scoped_release nogil;
    posembed::window_owner(w.doc_offsets.data(), w.ndocs(), w.win.data(), w.starts.data(),
                           w.lengths.data(), size, rule, dst);
  }
  return own;
}

template <class T>
py::array stitch_typed(const py::array& values, const CheckedWindows& w, int64_t size,
                       Reduce reduce, const py::object& fill) {
  const int64_t tokens = w.doc_offsets.back();
  const auto f = static_cast<int64_t>(values.shape(2));
  py::array_t<T> out(std::vector<py::ssize_t>{tokens, f});
  const T fill_value = fill.cast<T>();
  const T* src = static_cast<const T*>(values.data());
  T* dst = out.mutable_data();
  int64_t unfit = -1;
  {
    py::gil_scoped_release nogil;
    unfit = posembed::stitch<T>(src, f, w.doc_offsets.data(), w.ndocs(), w.win.data(),
                                w.starts.data(), w.lengths.data(), size, reduce, fill_value, dst);
  }
  if (unfit >= 0) {
    PyErr_Format(PyExc_ValueError,
                 "values: the sum over windows of token %lld lies outside %s's range "
                 "(reduce='sum' adds integers exactly); sum in float64 "
                 "(values.astype(numpy.float64)) or use reduce='mean'",
                 static_cast<long long>(unfit), std::is_signed_v<T> ? "int64" : "uint64");
    throw py::error_already_set();
  }
  return out;
}

// values: (n, size, f) C-contiguous of float32, float64, int64 or uint64 (the
// Python layer converts); returns (N, f) of the same type.
py::array stitch(const py::array& values, const I64& doc_offsets, const I64& starts,
                 const I64& lengths, const I64& documents, int64_t size, Reduce reduce,
                 const py::object& fill) {
  member(reduce, Reduce::center);
  const CheckedWindows w = checked_windows(doc_offsets, starts, lengths, documents, size);
  if (values.ndim() != 3 || !c_contiguous(values) || values.shape(0) != w.count() ||
      values.shape(1) != size) {
    throw py::value_error("stitch: values must be (n, size, f) and C-contiguous");
  }
  const char kind = values.dtype().kind();
  const auto isz = values.itemsize();
  const auto typed = [&](auto zero) {
    using T = decltype(zero);
    return stitch_typed<T>(values, w, size, reduce, fill);
  };
  if (kind == 'f' && isz == 4) return typed(float{});
  if (kind == 'f' && isz == 8) return typed(double{});
  if (kind == 'i' && isz == 8) return typed(int64_t{});
  if (kind == 'u' && isz == 8) return typed(uint64_t{});
  throw py::type_error("stitch: values must be float32, float64, int64 or uint64");
}

}  // namespace

void bind_windows(py::module_& m) {
  py::enum_<Tail>(m, "Tail", "How the last window of each document is placed.")
      .value("pad", Tail::pad)
      .value("shift", Tail::shift)
      .value("drop", Tail::drop);
  py::enum_<OwnerRule>(m, "OwnerRule", "Which window owns a token that several windows hold.")
      .value("first", OwnerRule::first)
      .value("center", OwnerRule::center);
  py::enum_<Reduce>(m, "Reduce", "How stitch combines the slots that hold the same token.")
      .value("mean", Reduce::mean)
      .value("sum", Reduce::sum)
      .value("max", Reduce::max)
      .value("first", Reduce::first)
      .value("center", Reduce::center);
  m.def("window_layout", &window_layout, "doc_offsets"_a, "size"_a, "step"_a, "tail"_a,
        "win_offsets"_a = py::none(), "begin"_a = 0, "end"_a = -1);
  m.def("fill_windows", &fill_windows, "tokens"_a, "token_start"_a, "doc_offsets"_a, "starts"_a,
        "lengths"_a, "documents"_a, "size"_a, "pad"_a, "out"_a = py::none());
  m.def("fill_windows_to_file", &fill_windows_to_file, "in_fd"_a, "in_offset"_a, "itemsize"_a,
        "swap"_a, "token_count"_a, "doc_offsets"_a, "starts"_a, "lengths"_a, "documents"_a,
        "size"_a, "pad"_a, "out_fd"_a, "out_offset"_a, "block_bytes"_a);
  m.def("window_owner", &window_owner, "doc_offsets"_a, "starts"_a, "lengths"_a, "documents"_a,
        "size"_a, "rule"_a);
  m.def("stitch", &stitch, "values"_a, "doc_offsets"_a, "starts"_a, "lengths"_a, "documents"_a,
        "size"_a, "reduce"_a, "fill"_a);
}

}  // namespace posembed::bind
