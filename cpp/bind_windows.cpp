// Bindings of the windows family: windows (a token stream or corpus cut into
// overlapping windows), window_owner (which slot owns each token) and stitch
// (per-window values back to per-token values).
#include <type_traits>

#include "bind.hpp"
#include "windows.hpp"

namespace posembed::bind {
namespace {

using namespace pybind11::literals;

// tokens: 1-D C-contiguous; doc_offsets: int64 C-contiguous, validated by the
// Python layer (starts at 0, non-decreasing, ends at len(tokens)); pad: one
// element of the tokens' dtype.
py::tuple windows(const py::array& tokens, const py::array& doc_offsets, int64_t size,
                  int64_t step, Tail tail, const py::array& pad, const py::object& out_obj) {
  if (tokens.ndim() != 1 || !c_contiguous(tokens) || doc_offsets.ndim() != 1 ||
      !c_contiguous(doc_offsets) || doc_offsets.itemsize() != 8 || doc_offsets.size() < 1 ||
      pad.size() != 1 || pad.itemsize() != tokens.itemsize() || size < 1 || step < 1 ||
      step > size) {
    throw py::value_error("windows: inconsistent arguments");
  }
  const auto* offs = static_cast<const int64_t*>(doc_offsets.data());
  const auto ndocs = static_cast<int64_t>(doc_offsets.size()) - 1;
  if (offs[0] != 0 || offs[ndocs] != static_cast<int64_t>(tokens.size())) {
    throw py::value_error("windows: offsets must run from 0 to len(tokens)");
  }
  for (int64_t k = 0; k < ndocs; ++k) {
    if (offs[k + 1] < offs[k]) throw py::value_error("windows: offsets must not decrease");
  }
  std::vector<int64_t> win(static_cast<size_t>(ndocs + 1));
  window_offsets(offs, ndocs, size, step, tail, win.data());
  const int64_t n = win[static_cast<size_t>(ndocs)];
  py::array out = output_array(out_obj, tokens.dtype(), {n, size});
  py::array_t<int64_t> starts(n), lengths(n), documents(n);
  const WindowsOut wo{static_cast<char*>(out.mutable_data()), starts.mutable_data(),
                      lengths.mutable_data(), documents.mutable_data()};
  const auto* src = static_cast<const char*>(tokens.data());
  const auto* pv = static_cast<const char*>(pad.data());
  const auto itemsize = static_cast<int64_t>(tokens.itemsize());
  {
    py::gil_scoped_release nogil;
    fill_windows(src, itemsize, offs, ndocs, win.data(), size, step, tail, pv, wo);
  }
  return py::make_tuple(out, starts, lengths, documents);
}

// First window of each document (ndocs + 1 entries) from the sorted document
// index of every window, checking what memory safety needs.
std::vector<int64_t> windows_per_document(const I64& doc_offsets, const I64& starts,
                                          const I64& lengths, const I64& documents,
                                          int64_t size) {
  const auto ndocs = static_cast<int64_t>(doc_offsets.size()) - 1;
  const auto n = static_cast<int64_t>(starts.size());
  if (ndocs < 0 || lengths.size() != starts.size() || documents.size() != starts.size() ||
      size < 1) {
    throw py::value_error("windows: inconsistent window arrays");
  }
  std::vector<int64_t> win(static_cast<size_t>(ndocs + 1), 0);
  const int64_t* docs = documents.data();
  const int64_t* offs = doc_offsets.data();
  for (int64_t w = 0; w < n; ++w) {
    const int64_t d = docs[w];
    if (d < 0 || d >= ndocs || (w > 0 && d < docs[w - 1]) || starts.data()[w] < 0 ||
        lengths.data()[w] < 0 || lengths.data()[w] > size ||
        starts.data()[w] + lengths.data()[w] > offs[d + 1] - offs[d] ||
        (w > 0 && d == docs[w - 1] &&
         (starts.data()[w] < starts.data()[w - 1] ||
          starts.data()[w] + lengths.data()[w] < starts.data()[w - 1] + lengths.data()[w - 1]))) {
      throw py::value_error("windows: window arrays do not describe these documents");
    }
    ++win[static_cast<size_t>(d + 1)];
  }
  for (int64_t k = 0; k < ndocs; ++k) win[static_cast<size_t>(k + 1)] += win[static_cast<size_t>(k)];
  return win;
}

py::array window_owner(const I64& doc_offsets, const I64& starts, const I64& lengths,
                       const I64& documents, int64_t size, OwnerRule rule) {
  const std::vector<int64_t> win =
      windows_per_document(doc_offsets, starts, lengths, documents, size);
  const auto ndocs = static_cast<int64_t>(doc_offsets.size()) - 1;
  const auto n = static_cast<int64_t>(starts.size());
  py::array_t<bool> own(Shape{n, size});
  bool* dst = own.mutable_data();
  {
    py::gil_scoped_release nogil;
    posembed::window_owner(doc_offsets.data(), ndocs, win.data(), starts.data(), lengths.data(),
                           size, rule, dst);
  }
  return own;
}

template <class T>
py::array stitch_typed(const py::array& values, const I64& doc_offsets, const I64& starts,
                       const I64& lengths, const std::vector<int64_t>& win, int64_t size,
                       Reduce reduce, const py::object& own_obj, const py::object& fill) {
  const auto ndocs = static_cast<int64_t>(doc_offsets.size()) - 1;
  const int64_t tokens = doc_offsets.data()[ndocs];
  const auto f = static_cast<int64_t>(values.shape(2));
  const bool* own = nullptr;
  py::array_t<bool, py::array::c_style> own_arr;
  if (!own_obj.is_none()) {
    own_arr = own_obj.cast<py::array_t<bool, py::array::c_style>>();
    if (own_arr.size() != values.shape(0) * size) throw py::value_error("stitch: owner shape");
    own = own_arr.data();
  }
  py::array_t<T> out(std::vector<py::ssize_t>{tokens, f});
  const T fill_value = fill.cast<T>();
  const T* src = static_cast<const T*>(values.data());
  T* dst = out.mutable_data();
  int64_t unfit = -1;
  {
    py::gil_scoped_release nogil;
    unfit = posembed::stitch<T>(src, f, doc_offsets.data(), ndocs, win.data(), starts.data(),
                                lengths.data(), size, reduce,
                                own, fill_value, dst);
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
                 const py::object& own, const py::object& fill) {
  const std::vector<int64_t> win =
      windows_per_document(doc_offsets, starts, lengths, documents, size);
  if (values.ndim() != 3 || !c_contiguous(values) || values.shape(0) != starts.size() ||
      values.shape(1) != size || (reduce == Reduce::owned && own.is_none())) {
    throw py::value_error("stitch: values must be (n, size, f) and C-contiguous");
  }
  const char kind = values.dtype().kind();
  const auto isz = values.itemsize();
  if (kind == 'f' && isz == 4) return stitch_typed<float>(values, doc_offsets, starts, lengths, win, size, reduce, own, fill);
  if (kind == 'f' && isz == 8) return stitch_typed<double>(values, doc_offsets, starts, lengths, win, size, reduce, own, fill);
  if (kind == 'i' && isz == 8) return stitch_typed<int64_t>(values, doc_offsets, starts, lengths, win, size, reduce, own, fill);
  if (kind == 'u' && isz == 8) return stitch_typed<uint64_t>(values, doc_offsets, starts, lengths, win, size, reduce, own, fill);
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
      .value("owned", Reduce::owned);
  m.def("windows", &windows, "tokens"_a, "doc_offsets"_a, "size"_a, "step"_a, "tail"_a, "pad"_a,
        "out"_a = py::none());
  m.def("window_owner", &window_owner, "doc_offsets"_a, "starts"_a, "lengths"_a, "documents"_a,
        "size"_a, "rule"_a);
  m.def("stitch", &stitch, "values"_a, "doc_offsets"_a, "starts"_a, "lengths"_a, "documents"_a,
        "size"_a, "reduce"_a, "own"_a, "fill"_a);
}

}  // namespace posembed::bind
