// Bindings of the samples family: the tokens of a split's documents, the
// sample index alone (Megatron's build_sample_idx) and the three GPTDataset
// indices at once.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "bind.hpp"
#include "samples.hpp"

namespace posembed::bind {
namespace {

using namespace pybind11::literals;

// An int32 or int64 1-D array as the kernels read it (the Python layer has
// made it so; this is the memory-safety check).
bool wide_ints(const py::array& a, const char* name) {
  const bool ok = a.ndim() == 1 && c_contiguous(a) && a.dtype().kind() == 'i' &&
                  (a.itemsize() == 4 || a.itemsize() == 8) && a.dtype().byteorder() != '>' &&
                  (reinterpret_cast<uintptr_t>(a.data()) % static_cast<uintptr_t>(a.itemsize())) ==
                      0;
  if (!ok) throw py::type_error(std::string(name) + ": expected a 1-D int32 or int64 array");
  return a.itemsize() == 8;
}

// The one wording of what sample_index and document_tokens found.
[[noreturn]] void raise_fault(const SampleIndexFault& fault, const char* ids, int64_t nlengths) {
  if (fault.too_many_tokens) {
    throw py::value_error("lengths: the sequences hold 2^62 tokens or more");
  }
  const auto k = static_cast<long long>(fault.position);
  const auto d = static_cast<long long>(fault.document);
  if (fault.document < 0 || fault.document >= nlengths) {
    PyErr_Format(PyExc_ValueError,
                 "%s[%lld] = %lld is not a sequence of lengths (valid ids are 0..%lld)", ids, k,
                 d, static_cast<long long>(nlengths - 1));
  } else {
    PyErr_Format(PyExc_ValueError,
                 "lengths[%lld] = %lld is negative (%s[%lld]); sequence lengths must be >= 0", d,
                 static_cast<long long>(fault.length), ids, k);
  }
  throw py::error_already_set();
}

bool faulty(const SampleIndexFault& fault) { return fault.position >= 0 || fault.too_many_tokens; }

// The tokens of `documents` (every sequence when None).
int64_t document_tokens(const py::array& lengths, const py::object& documents_obj) {
  const std::optional<I64> documents =
      documents_obj.is_none() ? std::nullopt : std::optional<I64>(documents_obj.cast<I64>());
  const bool wide = wide_ints(lengths, "lengths");
  const auto n = static_cast<int64_t>(lengths.size());
  if (documents && documents->ndim() != 1) {
    throw py::value_error("documents: expected a 1-D array");
  }
  // The kernel reads each id (and the length it names) once and checks it:
  // another thread may rewrite the caller's arrays meanwhile.
  const int64_t count = documents ? static_cast<int64_t>(documents->size()) : n;
  const int64_t* ids_data = documents ? documents->data() : nullptr;
  int64_t total = 0;
  SampleIndexFault fault;
  {
    py::gil_scoped_release nogil;
    fault = wide ? posembed::document_tokens(static_cast<const int64_t*>(lengths.data()), n,
                                             ids_data, count, &total)
                 : posembed::document_tokens(static_cast<const int32_t*>(lengths.data()), n,
                                             ids_data, count, &total);
  }
  if (faulty(fault)) raise_fault(fault, "documents", n);
  return total;
}

template <class Len, class Doc, class Out>
SampleIndexFault typed_sample_index(const py::array& lengths, const Doc* doc_index, int64_t ndoc,
                                    int64_t seq_len, int64_t extra, int64_t num_samples,
                                    py::array& out) {
  return posembed::sample_index(static_cast<const Len*>(lengths.data()),
                                static_cast<int64_t>(lengths.size()), doc_index, ndoc, seq_len,
                                extra, num_samples, static_cast<Out*>(out.mutable_data()));
}

// Runs the sample index kernel for the dtypes given; call without the GIL.
template <class Doc>
SampleIndexFault run_sample_index(const py::array& lengths, bool wide_lengths, const Doc* docs,
                                  int64_t ndoc, int64_t seq_len, int64_t extra,
                                  int64_t num_samples, bool wide_out, py::array& out) {
  if (wide_lengths) {
    return wide_out ? typed_sample_index<int64_t, Doc, int64_t>(lengths, docs, ndoc, seq_len,
                                                                extra, num_samples, out)
                    : typed_sample_index<int64_t, Doc, int32_t>(lengths, docs, ndoc, seq_len,
                                                                extra, num_samples, out);
  }
  return wide_out ? typed_sample_index<int32_t, Doc, int64_t>(lengths, docs, ndoc, seq_len, extra,
                                                              num_samples, out)
                  : typed_sample_index<int32_t, Doc, int32_t>(lengths, docs, ndoc, seq_len, extra,
                                                              num_samples, out);
}

void check_sample_arguments(int64_t ndoc, int64_t seq_len, int64_t extra, int64_t num_samples) {
  constexpr int64_t limit = int64_t{1} << 62;
  if (ndoc < 1 || seq_len < 1 || (extra != 0 && extra != 1) || num_samples < 0 ||
      seq_len >= limit || num_samples + 1 > (limit - 1 - extra) / seq_len) {
    throw py::value_error("sample_index: inconsistent arguments");
  }
}

py::array make_sample_index(int64_t num_samples, bool wide) {
  const Shape shape{num_samples + 1, 2};
  if (wide) return py::array_t<int64_t>(shape);
  return py::array_t<int32_t>(shape);
}

// Megatron's build_sample_idx over the caller's document index.
py::array sample_index(const py::array& lengths, const py::array& document_index, int64_t seq_len,
                       int64_t extra, int64_t num_samples, bool wide) {
  const bool wide_lengths = wide_ints(lengths, "lengths");
  const bool wide_docs = wide_ints(document_index, "document_index");
  const auto ndoc = static_cast<int64_t>(document_index.size());
  check_sample_arguments(ndoc, seq_len, extra, num_samples);
  if (lengths.size() < 1) throw py::value_error("sample_index: no sequences");
  py::array out = make_sample_index(num_samples, wide);
  SampleIndexFault fault;
  {
    py::gil_scoped_release nogil;
    // Each document id and length is read once and checked where it is
    // read; what the kernel uses after is its own copy (see samples.hpp).
    fault = wide_docs
                ? run_sample_index(lengths, wide_lengths,
                                   static_cast<const int64_t*>(document_index.data()), ndoc,
                                   seq_len, extra, num_samples, wide, out)
                : run_sample_index(lengths, wide_lengths,
                                   static_cast<const int32_t*>(document_index.data()), ndoc,
                                   seq_len, extra, num_samples, wide, out);
  }
  if (faulty(fault)) raise_fault(fault, "document_index", static_cast<int64_t>(lengths.size()));
  return out;
}

LegacyState legacy_state(const py::array_t<uint32_t, py::array::c_style>& key, int pos) {
  if (key.ndim() != 1 || key.size() != 624 || pos < 0 || pos > 624) {
    throw py::value_error("gpt_indices: not an MT19937 state");
  }
  LegacyState state{};
  std::copy(key.data(), key.data() + 624, state.key);
  state.pos = pos;
  return state;
}

template <class T>
void shuffle_range(T* x, int64_t n, LegacyState& state) {
  posembed::legacy_shuffle(x, n, state);
}

// The document, sample and shuffle index of GPTDataset, in the order
// Megatron draws from one RandomState: the document index (its first
// epochs, then its last when the final epoch is separate), then the shuffle
// index (the samples before the final epoch, then the rest).
py::tuple gpt_indices(const py::array& lengths, const py::object& documents_obj,
                      int64_t epochs, bool separate, int64_t samples_before_final,
                      int64_t seq_len, int64_t extra, int64_t num_samples,
                      const py::array_t<uint32_t, py::array::c_style>& key, int pos,
                      bool wide_documents, bool wide_samples, bool wide_shuffle) {
  const std::optional<I64> documents =
      documents_obj.is_none() ? std::nullopt : std::optional<I64>(documents_obj.cast<I64>());
  const bool wide_lengths = wide_ints(lengths, "lengths");
  const auto nlengths = static_cast<int64_t>(lengths.size());
  LegacyState state = legacy_state(key, pos);
  if (documents && documents->ndim() != 1) {
    throw py::value_error("documents: expected a 1-D array");
  }
  const int64_t ndocs = documents ? static_cast<int64_t>(documents->size()) : nlengths;
  constexpr int64_t limit = int64_t{1} << 62;
  const bool split = separate && epochs > 1;
  if (ndocs < 1 || epochs < 1 || epochs > limit / ndocs || samples_before_final < 0 ||
      (split && samples_before_final > limit)) {
    throw py::value_error("gpt_indices: inconsistent arguments");
  }
  const int64_t ndoc = ndocs * epochs;
  check_sample_arguments(ndoc, seq_len, extra, num_samples);
  const int64_t* ids_data = documents ? documents->data() : nullptr;
  // Megatron's two shuffle ranges: [0, before) and [before, num_samples),
  // the second empty unless split (and when before >= num_samples).
  const int64_t first = split ? samples_before_final : num_samples;
  const int64_t second = split ? std::max<int64_t>(0, num_samples - samples_before_final) : 0;
  py::array doc_index = wide_documents ? py::array(py::array_t<int64_t>(ndoc))
                                       : py::array(py::array_t<int32_t>(ndoc));
  py::array samples = make_sample_index(num_samples, wide_samples);
  py::array shuffle = wide_shuffle ? py::array(py::array_t<int64_t>(first + second))
                                   : py::array(py::array_t<uint32_t>(first + second));
  SampleIndexFault fault;
  {
    py::gil_scoped_release nogil;
    const auto build_documents = [&](auto* docs) {
      // the caller's ids are read once, into the first epoch, and checked there
      SampleIndexFault bad_id;
      bad_id.position = posembed::tile_documents(ids_data, ndocs, nlengths, epochs, docs);
      if (bad_id.position >= 0) {
        // read again for the message only
        bad_id.document = ids_data != nullptr ? ids_data[bad_id.position] : bad_id.position;
        return bad_id;
      }
      if (split) {
        shuffle_range(docs, ndoc - ndocs, state);
        shuffle_range(docs + (ndoc - ndocs), ndocs, state);
      } else {
        shuffle_range(docs, ndoc, state);
      }
      return run_sample_index(lengths, wide_lengths, docs, ndoc, seq_len, extra, num_samples,
                              wide_samples, samples);
    };
    const auto build_shuffle = [&](auto* order) {
      // arange(0, before) then arange(before, num_samples): one iota
      posembed::iota(order, first + second);
      shuffle_range(order, first, state);
      if (split) shuffle_range(order + first, second, state);
    };
    fault = wide_documents ? build_documents(static_cast<int64_t*>(doc_index.mutable_data()))
                           : build_documents(static_cast<int32_t*>(doc_index.mutable_data()));
    if (!faulty(fault)) {
      if (wide_shuffle) {
        build_shuffle(static_cast<int64_t*>(shuffle.mutable_data()));
      } else {
        build_shuffle(static_cast<uint32_t*>(shuffle.mutable_data()));
      }
    }
  }
  if (faulty(fault)) raise_fault(fault, "documents", nlengths);
  return py::make_tuple(doc_index, samples, shuffle);
}

}  // namespace

void bind_samples(py::module_& m) {
  m.def("document_tokens", &document_tokens, "lengths"_a, "documents"_a = py::none());
  m.def("sample_index", &sample_index, "lengths"_a, "document_index"_a, "sequence_length"_a,
        "extra"_a, "num_samples"_a, "wide"_a);
  m.def("gpt_indices", &gpt_indices, "lengths"_a, "documents"_a, "epochs"_a, "separate"_a,
        "samples_before_final"_a, "sequence_length"_a, "extra"_a, "num_samples"_a, "key"_a,
        "pos"_a, "wide_documents"_a, "wide_samples"_a, "wide_shuffle"_a);
}

}  // namespace posembed::bind
