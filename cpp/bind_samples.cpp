// Bindings of the samples family: the tokens of a split's documents, the
// sample index alone (Megatron's build_sample_idx) and the three GPTDataset
// indices at once.

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "bind.hpp"
#include "gpt_batch.hpp"
#include "mapped.hpp"
#include "runtime.hpp"
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

// One of GPTSamples' index arrays (int32, uint32 or int64, C-contiguous).
IndexView index_view(const py::array& a, const char* name, bool unsigned_ok) {
  const char kind = a.dtype().kind();
  const auto item = a.itemsize();
  const bool ok = c_contiguous(a) && a.dtype().byteorder() != '>' &&
                  ((kind == 'i' && (item == 4 || item == 8)) ||
                   (unsigned_ok && kind == 'u' && item == 4));
  if (!ok) throw py::type_error(std::string(name) + ": expected a C-contiguous int32/int64 array");
  return IndexView{a.data(), static_cast<int64_t>(a.size()), item == 8, kind == 'u'};
}

[[noreturn]] void raise_batch_fault(const BatchResult& r, const char* bin) {
  const auto ll = [](int64_t x) { return static_cast<long long>(x); };
  const long long row = ll(r.row), sample = ll(r.sample);
  switch (r.fault) {
    case BatchFault::index:
      PyErr_Format(PyExc_IndexError,
                   "indices[%lld] = %lld is out of range for the %lld samples of the shuffle "
                   "index",
                   row, ll(r.a), ll(r.b));
      break;
    case BatchFault::shuffle:
      PyErr_Format(PyExc_ValueError,
                   "shuffle_index: indices[%lld] names sample %lld, which is not a sample of the "
                   "sample index (0..%lld)",
                   row, ll(r.a), ll(r.b) - 1);
      break;
    case BatchFault::span:
      PyErr_Format(PyExc_ValueError,
                   "sample_index: sample %lld spans positions %lld..%lld, which are not positions "
                   "of the document index (0..%lld)",
                   sample, ll(r.b), ll(r.c), ll(r.d) - 1);
      break;
    case BatchFault::sequence:
      PyErr_Format(PyExc_ValueError,
                   "corpus: these samples read sequence %lld, but the corpus holds %lld "
                   "sequences: it is not the one whose lengths built them",
                   ll(r.a), ll(r.d));
      break;
    case BatchFault::offsets:
      PyErr_Format(PyExc_ValueError,
                   "corpus offsets: sequence %lld spans %lld..%lld, which is not inside the %lld "
                   "tokens",
                   ll(r.a), ll(r.b), ll(r.c), ll(r.d));
      break;
    case BatchFault::length:
      PyErr_Format(PyExc_ValueError,
                   "corpus: sequence %lld holds %lld tokens, but these samples were built from a "
                   "length of %lld: the corpus is not the one whose lengths built them",
                   ll(r.a), ll(r.b), ll(r.c));
      break;
    case BatchFault::piece:
      PyErr_Format(PyExc_ValueError,
                   "corpus: sequence %lld holds %lld tokens, but these samples read its tokens "
                   "%lld..%lld: the corpus is not the one whose lengths built them",
                   ll(r.a), ll(r.b), ll(r.c), ll(r.d) - 1);
      break;
    case BatchFault::overfill:
      PyErr_Format(PyExc_ValueError,
                   "corpus: sequence %lld holds %lld tokens, and sample %lld would read %lld "
                   "tokens or more of it and the sequences before, past its width: the corpus is "
                   "not the one whose lengths built these samples",
                   ll(r.a), ll(r.b), sample, ll(r.c));
      break;
    case BatchFault::underfill:
      PyErr_Format(PyExc_ValueError,
                   "corpus: sample %lld reads %lld tokens, fewer than its width, ending in "
                   "sequence %lld of %lld tokens: the corpus is not the one whose lengths built "
                   "these samples",
                   sample, ll(r.c), ll(r.a), ll(r.b));
      break;
    case BatchFault::token:
      PyErr_Format(PyExc_ValueError,
                   "corpus: sequence %lld holds token id %llu (its token %lld), which int64 "
                   "cannot hold: samples are int64, as Megatron's, so token ids must be in "
                   "0..2^63-1",
                   ll(r.a), static_cast<unsigned long long>(r.b), ll(r.c));
      break;
    case BatchFault::ended:
      PyErr_Format(PyExc_ValueError,
                   "%s: input changed while reading (it ended at byte %lld, before the tokens "
                   "read)",
                   bin, ll(r.a));
      break;
    case BatchFault::io:
      PyErr_Format(PyExc_ValueError, "%s: cannot be read (%s)", bin,
                   std::strerror(static_cast<int>(r.a)));
      break;
    case BatchFault::none: PyErr_SetString(PyExc_RuntimeError, "gpt_batch: no fault"); break;
  }
  throw py::error_already_set();
}

// Batches of GPT samples (see gpt_batch.hpp) from one set of indices, one
// corpus and one set of options, checked once; each call checks and reads
// only its sample numbers. The tokens come from `tokens` (in memory), else
// the file at `bin` (of `file_dtype`, checked before and after each call's reads: see StableFile),
// else each call's `text` (rows the caller read). A call returns (tokens,
// labels, loss_mask, position_ids, cu_seqlens, cu_seqlens_padded,
// max_seqlen, attention_mask or None, part_starts, part_longest): with
// part_rows m dividing the rows into k parts, cu_seqlens holds each part's
// own boundaries (from 0, its end last) one after another, part k's from
// part_starts[k], and part_longest[k] its longest document; with m = 0, one
// part.
class GPTBatchReader {
 public:
  GPTBatchReader(py::array document_index, py::array sample_index, py::array shuffle_index,
                 int64_t sequence_length, int64_t extra, int64_t eod, int64_t pad,
                 bool reset_position_ids, bool reset_attention_mask, bool eod_mask_loss,
                 bool attention_mask, const py::object& offsets_obj,
                 const py::object& lengths_obj, const py::object& tokens_obj, std::string bin,
                 const py::object& file_dtype, int64_t file_offset, bool swap, int64_t ntokens,
                 const py::object& stamp)
      : document_index_(std::move(document_index)),
        sample_index_(std::move(sample_index)),
        shuffle_index_(std::move(shuffle_index)),
        attention_mask_(attention_mask),
        bin_(std::move(bin)) {
    const int64_t S = sequence_length;
    if (S < 1 || (extra != 0 && extra != 1) || S >= (int64_t{1} << 31) - 1) {
      throw py::value_error("gpt_batch: inconsistent arguments");
    }
    docs_ = index_view(document_index_, "document_index", false);
    samples_ = index_view(sample_index_, "sample_index", false);
    shuffle_ = index_view(shuffle_index_, "shuffle_index", true);
    if (samples_.count < 2 || samples_.count % 2 != 0) {
      throw py::value_error("sample_index: expected shape (n + 1, 2)");
    }
    options_.sequence_length = S;
    options_.extra = extra;
    options_.eod = eod;
    options_.pad = pad;
    options_.reset_position_ids = reset_position_ids;
    options_.reset_attention_mask = reset_attention_mask;
    options_.eod_mask_loss = eod_mask_loss;
    if (offsets_obj.is_none()) return;  // rows given by each call
    offsets_ = offsets_obj.cast<I64>();
    if (offsets_.ndim() != 1 || offsets_.size() < 2) {
      throw py::value_error("gpt_batch: offsets must be 1-D, of 2 or more entries");
    }
    source_.offsets = offsets_.data();
    source_.nseq = static_cast<int64_t>(offsets_.size()) - 1;
    if (!lengths_obj.is_none()) {
      lengths_ = lengths_obj.cast<py::array>();
      const bool wide = wide_ints(lengths_, "lengths");
      if (static_cast<int64_t>(lengths_.size()) != source_.nseq) {
        throw py::value_error("gpt_batch: lengths and offsets disagree");
      }
      source_.lengths = lengths_.data();
      source_.wide_lengths = wide;
    }
    if (!tokens_obj.is_none()) {
      tokens_ = tokens_obj.cast<py::array>();
      if (tokens_.ndim() != 1) throw py::value_error("gpt_batch: tokens must be 1-D");
      const PositionsView view = positions_view(tokens_, "corpus tokens");
      source_.memory = view.data;
      source_.kind = view.kind;
      source_.ntokens = view.count;
      return;
    }
    if (bin_.empty() || file_offset < 0 || ntokens < 0) {
      throw py::value_error("gpt_batch: a file needs its path, file_offset and ntokens >= 0");
    }
    const py::array probe(py::dtype::from_args(file_dtype), Shape{0});
    source_.kind = positions_view(probe, "file dtype").kind;
    source_.file_offset = file_offset;
    source_.swap = swap;
    source_.ntokens = ntokens;
    stamp_ = file_stamp(stamp);
    file_ = std::make_unique<StableFile>(bin_, stamp_);
  }

  // The batch of `indices` (a 1-D integer array), or None where they are
  // not all sample numbers of an integer dtype (the caller then checks them,
  // naming what is wrong). They are copied first: the caller's array may
  // change while the batch is read.
  py::object call(const py::array& indices, int64_t part_rows, const py::object& text_obj) {
    std::vector<int64_t> wanted;
    if (!index_numbers(indices, samples_.count / 2 - 1, &wanted)) return py::none();
    const int64_t S = options_.sequence_length;
    const auto rows = static_cast<int64_t>(wanted.size());
    if (rows > ((int64_t{1} << 31) - 1) / S) {
      PyErr_Format(PyExc_ValueError,
                   "indices: %lld samples of %lld tokens are %lld tokens, but cu_seqlens are "
                   "int32: a batch must hold fewer than 2^31 tokens",
                   static_cast<long long>(rows), static_cast<long long>(S),
                   static_cast<long long>(rows * S));
      throw py::error_already_set();
    }
    if (part_rows == 0) part_rows = std::max<int64_t>(rows, 1);
    if (part_rows < 0 || rows % part_rows != 0) {
      throw py::value_error("gpt_batch: part_rows must divide the rows");
    }
    TokenSource source = source_;
    std::optional<I64> text;
    if (source_.offsets == nullptr) {
      if (text_obj.is_none()) throw py::value_error("gpt_batch: rows to read from are needed");
      text = text_obj.cast<I64>();
      if (text->ndim() != 2 || text->shape(0) != rows || text->shape(1) != S + options_.extra) {
        throw py::value_error("gpt_batch: text must be (rows, sequence_length + extra)");
      }
      source.text = text->data();
    }
    // The five outputs share one block (each at a 64-byte boundary), which
    // goes back to a small cache when the last of them is freed: a training
    // loop that asks for a batch of the same shape each step gets the memory
    // of a batch it dropped, written before, instead of fresh pages to fault in.
    const auto round_up = [](int64_t n) { return (n + 63) / 64 * 64; };
    const int64_t wide_bytes = round_up(rows * S * 8), loss_bytes = round_up(rows * S * 4);
    const int64_t cu_bytes = round_up(rows * (S + 1) * 4);
    const py::capsule block = output_block(3 * wide_bytes + loss_bytes + cu_bytes);
    auto* start = static_cast<uint8_t*>(static_cast<OutputBlock*>(block.get_pointer())->data);
    const auto view = [&](auto* type, int64_t at, Shape shape) {
      using T = std::remove_pointer_t<decltype(type)>;
      return py::array_t<T>(shape, reinterpret_cast<T*>(start + at), block);
    };
    py::array_t<int64_t> out_tokens = view(static_cast<int64_t*>(nullptr), 0, Shape{rows, S});
    py::array_t<int64_t> out_labels =
        view(static_cast<int64_t*>(nullptr), wide_bytes, Shape{rows, S});
    py::array_t<int64_t> out_positions =
        view(static_cast<int64_t*>(nullptr), 2 * wide_bytes, Shape{rows, S});
    py::array_t<float> out_loss =
        view(static_cast<float*>(nullptr), 3 * wide_bytes, Shape{rows, S});
    py::array_t<int32_t> out_cu =
        view(static_cast<int32_t*>(nullptr), 3 * wide_bytes + loss_bytes, Shape{rows, S + 1});
    py::object mask = py::none();
    uint8_t* mask_data = nullptr;
    if (attention_mask_) {
      py::array_t<bool> m(Shape{rows, 1, S, S});
      mask_data = reinterpret_cast<uint8_t*>(m.mutable_data());
      mask = m;
    }
    const BatchOut out{out_tokens.mutable_data(),   out_labels.mutable_data(),
                       out_loss.mutable_data(),     out_positions.mutable_data(),
                       out_cu.mutable_data(),       mask_data};
    BatchResult result;
    FileStatus status;
    {
      py::gil_scoped_release nogil;
      std::shared_ptr<const OpenFile> file;  // held to the end of the reads
      if (file_ != nullptr) {
        status = file_->open(&file);
        if (file != nullptr) set_file(*file, &source.fd, &source.map, &source.map_size);
      }
      if (status.kind == FileStatus::ok) {
        result = posembed::gpt_batch(docs_, samples_, shuffle_, wanted.data(), rows, source,
                                     options_, out, get_num_threads());
        // rewritten during the reads: old and new tokens would mix
        if (file != nullptr && result.fault == BatchFault::none) status = file_->check(*file);
      }
    }
    if (status.kind != FileStatus::ok) raise_file_status(status, bin_, stamp_);
    if (result.fault != BatchFault::none) raise_batch_fault(result, bin_.c_str());
    const int64_t parts = rows / part_rows;
    int64_t total = parts;
    for (const int64_t s : result.segments) total += s;
    py::array_t<int32_t> flat(Shape{std::max<int64_t>(total, 1)});
    py::array_t<int64_t> starts(Shape{parts + 1}), longest(Shape{parts});
    int64_t* at = starts.mutable_data();
    int64_t* most = longest.mutable_data();
    at[0] = 0;
    if (parts == 0) flat.mutable_data()[0] = 0;
    for (int64_t k = 0; k < parts; ++k) {
      const int64_t first = k * part_rows;
      int64_t count = 1;
      most[k] = 0;
      for (int64_t r = first; r < first + part_rows; ++r) {
        count += result.segments[static_cast<size_t>(r)];
        most[k] = std::max(most[k], result.longest[static_cast<size_t>(r)]);
      }
      posembed::flat_cu_seqlens(out_cu.data() + first * (S + 1),
                                result.segments.data() + first, part_rows, S,
                                flat.mutable_data() + at[k]);
      at[k + 1] = at[k] + count;
    }
    return py::make_tuple(out_tokens, out_labels, out_loss, out_positions, flat, out_cu,
                          result.max_seqlen, mask, starts, longest);
  }

 private:
  py::array document_index_, sample_index_, shuffle_index_;
  IndexView docs_, samples_, shuffle_;
  BatchOptions options_;
  bool attention_mask_;
  I64 offsets_;
  py::array lengths_, tokens_;
  TokenSource source_;
  std::string bin_;
  FileStamp stamp_;
  std::unique_ptr<StableFile> file_;
};

}  // namespace

void bind_samples(py::module_& m) {
  py::class_<GPTBatchReader>(m, "GPTBatchReader")
      .def(py::init<py::array, py::array, py::array, int64_t, int64_t, int64_t, int64_t, bool,
                    bool, bool, bool, const py::object&, const py::object&, const py::object&,
                    std::string, const py::object&, int64_t, bool, int64_t, const py::object&>(),
           "document_index"_a, "sample_index"_a, "shuffle_index"_a, "sequence_length"_a,
           "extra"_a, "eod"_a, "pad"_a, "reset_position_ids"_a, "reset_attention_mask"_a,
           "eod_mask_loss"_a, "attention_mask"_a, "offsets"_a, "lengths"_a, "tokens"_a, "bin"_a,
           "file_dtype"_a, "file_offset"_a, "swap"_a, "ntokens"_a, "stamp"_a)
      .def("__call__", &GPTBatchReader::call, "indices"_a, "part_rows"_a = 0,
           "text"_a = py::none());
  m.def("document_tokens", &document_tokens, "lengths"_a, "documents"_a = py::none());
  m.def("sample_index", &sample_index, "lengths"_a, "document_index"_a, "sequence_length"_a,
        "extra"_a, "num_samples"_a, "wide"_a);
  m.def("gpt_indices", &gpt_indices, "lengths"_a, "documents"_a, "epochs"_a, "separate"_a,
        "samples_before_final"_a, "sequence_length"_a, "extra"_a, "num_samples"_a, "key"_a,
        "pos"_a, "wide_documents"_a, "wide_samples"_a, "wide_shuffle"_a);
}

}  // namespace posembed::bind
