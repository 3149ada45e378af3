// Bindings of the samples family: the tokens of a split's documents, the
// sample index alone (Megatron's build_sample_idx) and the three GPTDataset
// indices at once.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <limits>
#include <map>
#include <mutex>
#include <thread>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <unistd.h>

#include "batch_order.hpp"
#include "bind.hpp"
#include "gpt_batch.hpp"
#include "mapped.hpp"
#include "parallel.hpp"
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

// Gives an output block back to the cache (a read that failed, or was never taken).
struct BlockReturn {
  void operator()(OutputBlock* block) const { give_back_output_block(block); }
};
using BlockPtr = std::unique_ptr<OutputBlock, BlockReturn>;

// Where a batch's five outputs lie in the block they share, each at a
// 64-byte boundary: tokens, labels, position_ids (int64), loss_mask (float32),
// cu_seqlens_padded (int32).
struct BatchLayout {
  int64_t wide, loss, cu, total;
  BatchLayout(int64_t rows, int64_t S)
      : wide(round_up(rows * S * 8)),
        loss(round_up(rows * S * 4)),
        cu(round_up(rows * (S + 1) * 4)),
        total(3 * wide + loss + cu) {}
  static int64_t round_up(int64_t n) { return (n + 63) / 64 * 64; }
};

// One call's outputs, read without the GIL: the block they share (owned
// until wrapped into arrays), what the kernel and the file check found, and
// each part's flat cu_seqlens (one after another), where each begins and its
// longest document.
struct BatchRead {
  BlockPtr block;
  int64_t rows = 0, part_rows = 1;
  BatchResult result;
  FileStatus status;
  int64_t corpus = 0;   // a blend's corpus whose reader raises the failure
  std::string message;  // a blend's indices that name nothing it reads
  std::vector<int32_t> flat;
  std::vector<int64_t> starts, longest;
  bool ok() const {
    return status.kind == FileStatus::ok && result.fault == BatchFault::none && message.empty();
  }
};

// What reading some rows found (see BatchRead).
struct RowsRead {
  BatchResult result;
  FileStatus status;
  int64_t corpus = 0;
  std::string message;
};

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
    if (!index_numbers(indices, sample_count(), &wanted)) return py::none();
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
    py::object mask = py::none();
    uint8_t* mask_data = nullptr;
    if (attention_mask_) {
      py::array_t<bool> m(Shape{rows, 1, S, S});
      mask_data = reinterpret_cast<uint8_t*>(m.mutable_data());
      mask = m;
    }
    BatchRead read;
    {
      py::gil_scoped_release nogil;
      read = this->read(wanted.data(), rows, part_rows, source, mask_data);
    }
    return finish(read, mask);
  }

  // The batch of sample numbers wanted[0..rows) in parts of part_rows rows
  // (dividing rows), read from `source` into a block of the output cache.
  // Needs no GIL: safe on any thread, several at once; throws only
  // std::bad_alloc. The outputs share one block (each at a 64-byte
  // boundary), which goes back to a small cache when the last of them is
  // freed: a training loop that asks for a batch of the same shape each step
  // gets the memory of a batch it dropped, written before, instead of fresh
  // pages to fault in.
  BatchRead read(const int64_t* wanted, int64_t rows, int64_t part_rows,
                 const TokenSource& source, uint8_t* mask_data) {
    BatchRead r;
    r.rows = rows;
    r.part_rows = part_rows;
    r.block.reset(take_output_block(BatchLayout(rows, options_.sequence_length).total));
    std::tie(r.result, r.status) =
        read_rows(wanted, rows, static_cast<uint8_t*>(r.block->data), rows, 0, source, mask_data);
    cut(&r);
    return r;
  }

  // Rows first..first+count of a batch of `rows` rows laid out in `block`
  // (BatchLayout), sample numbers wanted[0..count): what the kernel and the
  // file checks found. Needs no GIL; several calls may fill one block's rows.
  std::pair<BatchResult, FileStatus> read_rows(const int64_t* wanted, int64_t count,
                                               uint8_t* block, int64_t rows, int64_t first,
                                               const TokenSource& source, uint8_t* mask_data) {
    BatchResult result;
    TokenSource from = source;
    std::shared_ptr<const OpenFile> file;  // held to the end of the reads
    FileStatus status = open_source(&from, &file);
    if (status.kind == FileStatus::ok) {
      result = posembed::gpt_batch(docs_, samples_, shuffle_, wanted, count, from, options_,
                                   outputs(block, rows, first, mask_data), get_num_threads());
      // rewritten during the reads: old and new tokens would mix
      if (file != nullptr && result.fault == BatchFault::none) status = file_->check(*file);
    }
    return {std::move(result), status};
  }

  // Where rows first.. of a batch of `rows` rows laid out in `block`
  // (BatchLayout) go; their dense masks from mask_data where given.
  BatchOut outputs(uint8_t* block, int64_t rows, int64_t first, uint8_t* mask_data) const {
    const int64_t S = options_.sequence_length;
    const BatchLayout at(rows, S);
    return BatchOut{reinterpret_cast<int64_t*>(block) + first * S,
                    reinterpret_cast<int64_t*>(block + at.wide) + first * S,
                    reinterpret_cast<float*>(block + 3 * at.wide) + first * S,
                    reinterpret_cast<int64_t*>(block + 2 * at.wide) + first * S,
                    reinterpret_cast<int32_t*>(block + 3 * at.wide + at.loss) + first * (S + 1),
                    mask_data};
  }

  // Its file (where it reads one) checked unchanged, held in *file until
  // check_source, and set in *from (a copy of source()). Needs no GIL.
  FileStatus open_source(TokenSource* from, std::shared_ptr<const OpenFile>* file) {
    FileStatus status;
    if (file_ != nullptr) {
      status = file_->open(file);
      if (*file != nullptr) set_file(**file, &from->fd, &from->map, &from->map_size);
    }
    return status;
  }
  // Whether the file that open_source held is still the same one (ok where none).
  FileStatus check_source(const std::shared_ptr<const OpenFile>& file) {
    return file == nullptr ? FileStatus{} : file_->check(*file);
  }
  // Sample `sample` (checked by the caller to be one) read from `from` into `out`,
  // on the calling thread. Needs no GIL.
  BatchResult read_one(int64_t sample, const TokenSource& from, const BatchOut& out) const {
    return posembed::gpt_batch(docs_, samples_, shuffle_, &sample, 1, from, options_, out, 1);
  }
  bool attention_mask() const { return attention_mask_; }
  int64_t extra() const { return options_.extra; }
  // Whether its tokens are its own (in memory or a local file), not each call's rows.
  bool reads_own_tokens() const { return source_.offsets != nullptr; }

  // A read made whole: failed, its block back in the cache; read, each
  // part's flat cu_seqlens, where each begins and its longest document.
  void cut(BatchRead* read) const {
    BatchRead& r = *read;
    if (!r.ok()) {
      r.block.reset();
      return;
    }
    const int64_t S = options_.sequence_length;
    const BatchLayout at(r.rows, S);
    const auto* cu = reinterpret_cast<const int32_t*>(static_cast<uint8_t*>(r.block->data) +
                                                      3 * at.wide + at.loss);
    const int64_t part_rows = r.part_rows, parts = r.rows / part_rows;
    int64_t total = parts;
    for (const int64_t s : r.result.segments) total += s;
    r.flat.assign(static_cast<size_t>(std::max<int64_t>(total, 1)), 0);
    r.starts.assign(static_cast<size_t>(parts + 1), 0);
    r.longest.assign(static_cast<size_t>(parts), 0);
    for (int64_t k = 0; k < parts; ++k) {
      const int64_t first = k * part_rows;
      int64_t count = 1;
      int64_t most = 0;
      for (int64_t row = first; row < first + part_rows; ++row) {
        count += r.result.segments[static_cast<size_t>(row)];
        most = std::max(most, r.result.longest[static_cast<size_t>(row)]);
      }
      r.longest[static_cast<size_t>(k)] = most;
      const int64_t begin = r.starts[static_cast<size_t>(k)];
      posembed::flat_cu_seqlens(cu + first * (S + 1), r.result.segments.data() + first,
                                part_rows, S, r.flat.data() + begin);
      r.starts[static_cast<size_t>(k + 1)] = begin + count;
    }
  }

  // The tuple of a read (see the class comment), with the GIL; a read that
  // failed raises its error (its block already back in the cache).
  py::object finish(BatchRead& r, const py::object& mask) {
    if (r.status.kind != FileStatus::ok) raise_file_status(r.status, bin_, stamp_);
    if (r.result.fault != BatchFault::none) raise_batch_fault(r.result, bin_.c_str());
    const int64_t S = options_.sequence_length, rows = r.rows;
    const BatchLayout at(rows, S);
    auto* start = static_cast<uint8_t*>(r.block->data);
    const py::capsule block = wrap_output_block(r.block.release());
    const auto view = [&](auto* type, int64_t offset, Shape shape) {
      using T = std::remove_pointer_t<decltype(type)>;
      return py::array_t<T>(shape, reinterpret_cast<T*>(start + offset), block);
    };
    const auto copied = [](const auto& values) {
      using T = typename std::decay_t<decltype(values)>::value_type;
      py::array_t<T> a(Shape{static_cast<py::ssize_t>(values.size())});
      std::copy(values.begin(), values.end(), a.mutable_data());
      return a;
    };
    return py::make_tuple(
        view(static_cast<int64_t*>(nullptr), 0, Shape{rows, S}),
        view(static_cast<int64_t*>(nullptr), at.wide, Shape{rows, S}),
        view(static_cast<float*>(nullptr), 3 * at.wide, Shape{rows, S}),
        view(static_cast<int64_t*>(nullptr), 2 * at.wide, Shape{rows, S}), copied(r.flat),
        view(static_cast<int32_t*>(nullptr), 3 * at.wide + at.loss, Shape{rows, S + 1}),
        r.result.max_seqlen, mask, copied(r.starts), copied(r.longest));
  }

  // The samples' count (the sample numbers are 0..count - 1).
  int64_t sample_count() const { return samples_.count / 2 - 1; }
  // Whether a read needs nothing of the caller's: tokens in memory or in a
  // local file, and no dense attention mask (a NumPy array).
  bool reads_alone() const { return source_.offsets != nullptr && !attention_mask_; }
  const TokenSource& source() const { return source_; }
  int64_t sequence_length() const { return options_.sequence_length; }

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

// The rows of a blend's samples: sample w of the blend is sample
// dataset_sample_index[w] of corpus dataset_index[w], read by that corpus's
// reader (readers[d]; None for a corpus that is not read). Each entry of
// the blend's indices is read once and checked: the caller's arrays may
// change meanwhile.
class BlendRows {
 public:
  BlendRows(const py::sequence& readers, py::array dataset_index, py::array dataset_sample_index)
      : keep_(py::tuple(readers)),  // the caller's list may change meanwhile, not this
        dataset_index_(std::move(dataset_index)),
        dataset_sample_index_(std::move(dataset_sample_index)) {
    for (const py::handle h : keep_) {
      GPTBatchReader* reader = h.is_none() ? nullptr : h.cast<GPTBatchReader*>();
      if (reader != nullptr) {
        if (!reader->reads_own_tokens()) {
          throw py::value_error("gpt blend batch: a reader needs the caller's rows");
        }
        if (any_ != nullptr && (reader->sequence_length() != any_->sequence_length() ||
                                reader->extra() != any_->extra() ||
                                reader->attention_mask() != any_->attention_mask())) {
          throw py::value_error("gpt blend batch: the readers' samples or options differ");
        }
        if (any_ == nullptr) any_ = reader;  // the first
      }
      readers_.push_back(reader);
    }
    const auto typed = [](const py::array& a, char kind, py::ssize_t item) {
      return a.ndim() == 1 && c_contiguous(a) && a.dtype().kind() == kind &&
             a.itemsize() == item && a.dtype().byteorder() != '>';
    };
    if (any_ == nullptr || !typed(dataset_index_, 'i', 2) ||
        !typed(dataset_sample_index_, 'i', 8) ||
        dataset_index_.size() != dataset_sample_index_.size()) {
      throw py::value_error(
          "gpt blend batch: expected readers and a blend's int16 dataset_index and int64 "
          "dataset_sample_index");
    }
    n_ = static_cast<int64_t>(dataset_index_.size());
  }

  GPTBatchReader* any() const { return any_; }
  int64_t count() const { return n_; }

  // Rows first..first+count of a batch of `rows` rows laid out in `block`,
  // blend samples wanted[0..count), each read by its corpus's reader (their
  // dense masks from mask_data, row `first`'s first, where given). A failure
  // is the first corpus's with one (then its first row, counted among its
  // own rows), as reading each corpus's rows in turn finds it. Needs no GIL.
  RowsRead read_rows(const int64_t* wanted, int64_t count, uint8_t* block, int64_t rows,
                     int64_t first, uint8_t* mask_data) const {
    RowsRead got;
    const auto corpora = static_cast<int64_t>(readers_.size());
    std::vector<int64_t> corpus(static_cast<size_t>(count)), local(static_cast<size_t>(count));
    std::vector<char> used(static_cast<size_t>(corpora), 0);
    const auto* which = static_cast<const volatile int16_t*>(dataset_index_.data());
    const auto* number = static_cast<const int64_t*>(dataset_sample_index_.data());
    const auto text = [](int64_t x) { return std::to_string(x); };
    for (int64_t j = 0; j < count; ++j) {
      const int64_t w = wanted[j];
      if (w < 0 || w >= n_) {
        got.message = "indices: " + text(w) + " is not a sample of the blend (0.." +
                      text(n_ - 1) + ")";
        return got;
      }
      const int64_t d = which[w], l = read_once(number + w);
      if (d < 0 || d >= corpora || readers_[static_cast<size_t>(d)] == nullptr) {
        got.message = "dataset_index: sample " + text(w) + " of the blend names corpus " +
                      text(d) + ", which is not one this batch reads (0.." + text(corpora - 1) +
                      "): the blend's indices changed while it was read";
        return got;
      }
      const int64_t has = readers_[static_cast<size_t>(d)]->sample_count();
      if (l < 0 || l >= has) {
        got.message = "dataset_sample_index: sample " + text(w) + " of the blend names sample " +
                      text(l) + " of corpus " + text(d) + ", which has " + text(has) +
                      " samples";
        return got;
      }
      corpus[static_cast<size_t>(j)] = d;
      local[static_cast<size_t>(j)] = l;
      used[static_cast<size_t>(d)] = 1;
    }
    const int64_t S = any_->sequence_length();
    std::vector<BatchResult> results(static_cast<size_t>(count));
    std::vector<FileStatus> statuses(static_cast<size_t>(corpora));
    std::vector<TokenSource> from(static_cast<size_t>(corpora));
    std::vector<std::shared_ptr<const OpenFile>> files(static_cast<size_t>(corpora));
    for (int64_t d = 0; d < corpora; ++d) {
      const auto k = static_cast<size_t>(d);
      if (used[k] == 0) continue;
      from[k] = readers_[k]->source();
      statuses[k] = readers_[k]->open_source(&from[k], &files[k]);
    }
    parallel_for(count, get_num_threads(), [&](int64_t begin, int64_t end, int) {
      for (int64_t j = begin; j < end; ++j) {
        const auto k = static_cast<size_t>(corpus[static_cast<size_t>(j)]);
        if (statuses[k].kind != FileStatus::ok) continue;
        uint8_t* own_mask = mask_data == nullptr ? nullptr : mask_data + j * S * S;
        results[static_cast<size_t>(j)] =
            readers_[k]->read_one(local[static_cast<size_t>(j)], from[k],
                                  readers_[k]->outputs(block, rows, first + j, own_mask));
      }
    });
    // each file read without a fault, checked unchanged after its reads
    std::vector<char> faulted(static_cast<size_t>(corpora), 0);
    for (int64_t j = 0; j < count; ++j) {
      if (results[static_cast<size_t>(j)].fault != BatchFault::none) {
        faulted[static_cast<size_t>(corpus[static_cast<size_t>(j)])] = 1;
      }
    }
    for (int64_t d = 0; d < corpora; ++d) {
      const auto k = static_cast<size_t>(d);
      if (used[k] != 0 && statuses[k].kind == FileStatus::ok && faulted[k] == 0) {
        statuses[k] = readers_[k]->check_source(files[k]);
      }
    }
    for (int64_t d = 0; d < corpora; ++d) {
      const auto k = static_cast<size_t>(d);
      if (used[k] == 0) continue;
      got.corpus = d;
      if (statuses[k].kind != FileStatus::ok) {
        got.status = statuses[k];
        return got;
      }
      int64_t own = 0;
      for (int64_t j = 0; j < count; ++j) {
        if (corpus[static_cast<size_t>(j)] != d) continue;
        if (results[static_cast<size_t>(j)].fault != BatchFault::none) {
          got.result = std::move(results[static_cast<size_t>(j)]);
          got.result.row = own;
          return got;
        }
        ++own;
      }
    }
    got.corpus = 0;
    got.result.segments.resize(static_cast<size_t>(count));
    got.result.longest.resize(static_cast<size_t>(count));
    for (int64_t j = 0; j < count; ++j) {
      const BatchResult& one = results[static_cast<size_t>(j)];
      got.result.segments[static_cast<size_t>(j)] = one.segments.at(0);
      got.result.longest[static_cast<size_t>(j)] = one.longest.at(0);
      got.result.max_seqlen = std::max(got.result.max_seqlen, one.max_seqlen);
    }
    return got;
  }

  // A failed read's error, with the GIL: the blend's own message, else that
  // of the reader of the corpus that failed (its block already let go).
  [[noreturn]] void raise(BatchRead& r, const py::object& mask) const {
    r.block.reset();
    if (!r.message.empty()) throw py::value_error(r.message);
    readers_.at(static_cast<size_t>(r.corpus))->finish(r, mask);
    throw std::logic_error("gpt blend batch: a failed read raised nothing");
  }

 private:
  py::tuple keep_;  // the readers, alive while this is
  std::vector<GPTBatchReader*> readers_;
  GPTBatchReader* any_ = nullptr;
  py::array dataset_index_, dataset_sample_index_;
  int64_t n_ = 0;
};

// A read's outcome moved into a BatchRead.
void take(RowsRead&& got, BatchRead* read) {
  read->result = std::move(got.result);
  read->status = got.status;
  read->corpus = got.corpus;
  read->message = std::move(got.message);
}

// A batch of a blend's samples (GPTBlendSplit.batch): blend sample
// indices[r] into row r of one block of the output cache (see BlendRows),
// on all threads. Gives the tuple GPTBatchReader's call gives, parts of
// part_rows rows (0: one).
py::object blend_batch(const py::sequence& readers, const py::array& dataset_index,
                       const py::array& dataset_sample_index, const py::array& indices,
                       int64_t part_rows) {
  const BlendRows blend(readers, dataset_index, dataset_sample_index);
  std::vector<int64_t> wanted;
  if (!index_numbers(indices, blend.count(), &wanted)) {
    throw py::index_error("gpt blend batch: indices must be sample numbers of the blend");
  }
  const int64_t S = blend.any()->sequence_length();
  const auto rows = static_cast<int64_t>(wanted.size());
  if (rows > ((int64_t{1} << 31) - 1) / S) {
    throw py::value_error("gpt blend batch: a batch must hold fewer than 2^31 tokens");
  }
  if (part_rows == 0) part_rows = std::max<int64_t>(rows, 1);
  if (part_rows < 0 || rows % part_rows != 0) {
    throw py::value_error("gpt blend batch: part_rows must divide the rows");
  }
  py::object mask = py::none();
  uint8_t* mask_data = nullptr;
  if (blend.any()->attention_mask()) {
    py::array_t<bool> m(Shape{rows, 1, S, S});
    mask_data = reinterpret_cast<uint8_t*>(m.mutable_data());
    mask = m;
  }
  BatchRead read;
  read.rows = rows;
  read.part_rows = part_rows;
  {
    py::gil_scoped_release nogil;
    read.block.reset(take_output_block(BatchLayout(rows, S).total));
    take(blend.read_rows(wanted.data(), rows, static_cast<uint8_t*>(read.block->data), rows, 0,
                         mask_data),
         &read);
  }
  if (!read.ok()) blend.raise(read, mask);
  blend.any()->cut(&read);
  return blend.any()->finish(read, mask);
}

// The read-ahead threads started and not finished in the process (a probe
// for the tests).
std::atomic<int> g_ahead_readers{0};
// Pieces of the read-ahead (a share of a run, or a run handed over as the
// end) that callers did while they waited (see help).
std::atomic<int64_t> g_caller_shares{0};

constexpr int64_t kMaxPosition = int64_t{1} << 62;

// A rank's micro-batches of GPT samples read ahead on threads of its own,
// which never take the GIL (a reader that had to would wait for the caller's
// Python at every call). Micro-batch i of the iteration is micro-step
// step0 + i of the sample stream; its m samples are the batch order's
// (n samples, seed, shuffle: batch_order.hpp) at positions
// (step0 + i) * stride + offset + 0..m-1. The micro-batches of groups
// first, first + every, ... of `group` micro-batches each (micro-batches
// first * group .. first * group + group - 1, and so on; below `count` where
// count >= 0) are read in runs of
// `run_length`, at most `ahead` runs begun and not yet taken by the caller,
// who takes them in order. Each run is one block of the output cache whose
// rows the `readers` (and the caller, where `caller_reads`) fill together,
// each a share of them in one kernel call on `threads` threads (the
// caller's on one): one block at a time is written by every core, as one
// kernel call on all of them would write it, with no OpenMP pool per reader
// (see the Python layer). The caller reads shares only while the run it
// takes next is not read: a core that would wait for the readers reads with
// them instead, and a caller busy elsewhere leaves the reading to them. A
// run that fails is read again one micro-batch at a time: those before the
// failing one are given, then its error.
class GPTBatchAhead {
 public:
  GPTBatchAhead(const py::object& reader, int64_t n, uint64_t seed, bool shuffle, int64_t step0,
                int64_t stride, int64_t offset, int64_t m, int64_t first, int64_t every,
                int64_t group, int64_t count, int64_t run_length, int64_t ahead, int readers,
                int threads, bool caller_reads, const py::object& blend)
      : keep_(reader),
        reader_(reader.cast<GPTBatchReader*>()),
        n_(n),
        seed_(seed),
        shuffle_(shuffle),
        step0_(step0),
        stride_(stride),
        offset_(offset),
        m_(m),
        first_(first),
        every_(every),
        group_(group),
        count_(count),
        run_length_(run_length),
        ahead_(ahead),
        caller_reads_(caller_reads),
        shares_(readers + (caller_reads ? 1 : 0)),
        pid_(getpid()) {
    if (!blend.is_none()) {  // (readers, dataset_index, dataset_sample_index)
      const auto parts = blend.cast<py::tuple>();
      if (parts.size() != 3) throw py::value_error("gpt batch read-ahead: blend is 3 parts");
      blend_ = std::make_unique<BlendRows>(parts[0].cast<py::sequence>(),
                                           parts[1].cast<py::array>(),
                                           parts[2].cast<py::array>());
      if (blend_->any() != reader_ || blend_->any()->attention_mask()) {
        throw py::value_error("gpt batch read-ahead: the blend's readers must read alone");
      }
    }
    if (!reader_->reads_alone()) {
      throw py::value_error("gpt batch read-ahead: the reader needs the caller's rows");
    }
    if (n < 1 || step0 < 0 || stride < 1 || offset < 0 || m < 1 || offset + m > stride ||
        first < 0 || every < 1 || group < 1 || count < -1 || run_length < 1 || ahead < 1 ||
        readers < 1 || threads < 1 ||
        m * run_length > ((int64_t{1} << 31) - 1) / reader_->sequence_length()) {
      throw py::value_error("gpt batch read-ahead: inconsistent arguments");
    }
    try {
      for (int k = 0; k < readers; ++k) {
        {
          const std::lock_guard<std::mutex> lock(s_->mutex);
          ++s_->alive;
        }
        g_ahead_readers.fetch_add(1);  // counted from here, so that a probe sees them all
        try {
          s_->readers.emplace_back([this, threads] { reader_loop(threads); });
        } catch (...) {
          g_ahead_readers.fetch_sub(1);
          const std::lock_guard<std::mutex> lock(s_->mutex);
          --s_->alive;
          throw;
        }
      }
    } catch (const std::exception&) {
      stop();
      throw;
    }
  }

  GPTBatchAhead(const GPTBatchAhead&) = delete;
  GPTBatchAhead& operator=(const GPTBatchAhead&) = delete;
  ~GPTBatchAhead() {
    stop();
    if (getpid() != pid_) (void)s_.release();  // a forked child: see Shared
  }

  // The next run: a list of (micro-batch numbers, samples (k, m), the batch
  // tuple of their k parts), or None at the end or once closed; a run's
  // error is raised once its micro-batches before the failing one are given.
  py::object next() {
    if (getpid() != pid_) throw py::value_error("gpt batch read-ahead: started in another process");
    Run run;
    for (;;) {
      bool got = false, room = false;
      {
        py::gil_scoped_release nogil;
        std::unique_lock<std::mutex> lock(s_->mutex);
        // the run, or closed, or no reader left to read it (the end was
        // handed over and taken, or a reader ran out of memory)
        const auto there = [&] {
          return s_->closing || s_->done.count(s_->taken) != 0 || s_->alive == 0;
        };
        while (!there() && help(lock)) {
        }
        got = s_->ready.wait_for(lock, std::chrono::milliseconds(50), there);
        if (got && !s_->closing) {
          if (s_->done.count(s_->taken) != 0) {
            room = pop(&run);
          } else if (s_->fatal) {
            run.error = Error::memory;
          }
        }
      }
      if (room) s_->room.notify_all();  // one run more may begin
      if (got) break;
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();  // Ctrl-C while waiting
    }
    if (!run.pieces.empty()) {
      py::list out;
      for (Piece& piece : run.pieces) {
        const auto k = static_cast<py::ssize_t>(piece.numbers.size());
        py::list numbers;
        for (const int64_t i : piece.numbers) numbers.append(i);
        py::array_t<int64_t> samples(Shape{k, static_cast<py::ssize_t>(m_)});
        std::copy(piece.samples.begin(), piece.samples.end(), samples.mutable_data());
        out.append(py::make_tuple(numbers, samples, reader_->finish(piece.read, py::none())));
      }
      return std::move(out);
    }
    switch (run.error) {
      case Error::none: return py::none();  // the end, or closed
      case Error::read:  // raises
        if (blend_ != nullptr) blend_->raise(run.failed, py::none());
        reader_->finish(run.failed, py::none());
        break;
      case Error::position: throw py::index_error(run.message);
      case Error::memory: throw std::bad_alloc();
    }
    return py::none();
  }

  // Stops the readers and waits for them (one inside a kernel call finishes
  // it first); the runs read and not taken go back to the output cache.
  void stop() {
    if (getpid() != pid_) return;  // a forked child: see Shared
    bool helping = false;
    {
      const std::lock_guard<std::mutex> lock(s_->mutex);
      s_->closing = true;
      helping = s_->helping > 0;
    }
    s_->ready.notify_all();
    s_->room.notify_all();
    if (s_->readers.empty() && !helping) return;
    {
      py::gil_scoped_release nogil;
      for (std::thread& t : s_->readers) t.join();
      // a caller on another thread first finishes the share it reads
      std::unique_lock<std::mutex> lock(s_->mutex);
      s_->ready.wait(lock, [&] { return s_->helping == 0; });
    }
    s_->readers.clear();
    const std::lock_guard<std::mutex> lock(s_->mutex);
    s_->reading.clear();
    s_->done.clear();
  }

 private:
  enum class Error { none, read, position, memory };
  struct Piece {
    std::vector<int64_t> numbers, samples;
    BatchRead read;
  };
  // A run as the caller takes it: its micro-batches (one piece, or one a
  // micro-batch where it was read again), or the error that ends it, or
  // neither (the end).
  struct Run {
    std::vector<Piece> pieces;
    Error error = Error::none;
    BatchRead failed;
    std::string message;
  };
  // A run being read: its micro-batches, samples and block, and each share's
  // result as the readers hand them in.
  struct Reading {
    std::vector<int64_t> numbers, samples;
    BlockPtr block;
    int next_share = 0, shares_left = 0;
    std::vector<RowsRead> shares;  // each share's, as it comes in
  };

  // What the readers and the caller share, under `mutex`. In a forked child
  // (whose copies of the readers never ran there) it is never touched nor
  // destroyed: its mutex may have been copied locked, its conditions with
  // waiters that do not exist there.
  struct Shared {
    std::mutex mutex;
    std::condition_variable ready;  // the caller waits for the run it takes next
    std::condition_variable room;   // the readers wait for room to begin a run
    std::map<int64_t, Reading> reading;
    std::map<int64_t, Run> done;
    int64_t claimed = 0, taken = 0;
    int64_t open = -1;  // the run whose shares are not all claimed, or -1
    int alive = 0;      // readers not yet finished
    int helping = 0;    // the caller reading a piece (see help)
    bool closing = false, ended = false;
    bool fatal = false;  // a reader ran out of memory: its run never comes
    std::vector<std::thread> readers;
  };

  // The run the caller takes next into *run (under the lock); its error
  // stays for the next call where it comes with micro-batches. True where a
  // run was taken: one run more may begin (the readers are woken once the
  // lock is let go).
  bool pop(Run* run) {
    auto it = s_->done.find(s_->taken);
    *run = std::move(it->second);
    if (!run->pieces.empty() && run->error != Error::none) {
      Run rest;
      rest.error = run->error;
      rest.failed = std::move(run->failed);
      rest.message = std::move(run->message);
      run->error = Error::none;
      it->second = std::move(rest);
      return false;
    }
    s_->done.erase(it);
    ++s_->taken;
    return true;
  }

  // Whom a hand-over wakes. They are woken once the lock is let go: a
  // thread woken under it would at once wait for it, and on a machine with
  // no core to spare it would wait for the reader that holds it to run again.
  struct Wake {
    bool caller = false;   // it waits for this run
    bool readers = false;  // the end or an error: the other readers stop
  };
  // Wakes them with `lock` let go meanwhile (held again on return).
  void wake(std::unique_lock<std::mutex>& lock, const Wake& w) {
    lock.unlock();
    if (w.caller) s_->ready.notify_one();  // the caller waits for no other
    if (w.readers) s_->room.notify_all();
    lock.lock();
  }

  // Hands a run over to the caller (under the lock).
  Wake hand_over(int64_t number, Run run) {
    Wake w;
    // the end (no micro-batches) or an error: no run after it begins
    w.readers = run.pieces.empty() || run.error != Error::none;
    if (w.readers) s_->ended = true;
    s_->done.emplace(number, std::move(run));
    w.caller = number == s_->taken;
    return w;
  }

  // Begins run `number` (under the lock): its micro-batches, samples and
  // block; false where it is the end or cannot be read (handed over as such,
  // *w whom to wake).
  bool begin(int64_t number, Wake* w) {
    Run run;
    Reading reading;
    try {
      if (plan(number, &reading, &run)) {
        const int64_t rows = static_cast<int64_t>(reading.samples.size());
        reading.block.reset(
            take_output_block(BatchLayout(rows, reader_->sequence_length()).total));
        reading.shares_left = shares_;
        reading.shares.resize(static_cast<size_t>(shares_));
        s_->reading.emplace(number, std::move(reading));
        return true;
      }
    } catch (const std::bad_alloc&) {
      run = Run{};
      run.error = Error::memory;
    }
    *w = hand_over(number, std::move(run));
    return false;
  }

  void reader_loop(int threads) {
    set_calling_thread_threads(threads);
    try {
      read_runs();
    } catch (...) {  // out of memory: no other exception comes out of the reads
      const std::lock_guard<std::mutex> lock(s_->mutex);
      s_->fatal = true;
      s_->ended = true;
    }
    {
      const std::lock_guard<std::mutex> lock(s_->mutex);
      --s_->alive;
    }
    s_->ready.notify_all();
    s_->room.notify_all();
    g_ahead_readers.fetch_sub(1);
  }

  // A reader: a share of the run being read, else a new run where there is
  // room; until closed or the end (or an error) is handed over.
  void read_runs() {
    std::unique_lock<std::mutex> lock(s_->mutex);
    while (!s_->closing && (s_->open >= 0 || !s_->ended)) {
      if (!work(lock)) s_->room.wait(lock);
    }
  }

  // One piece of the reading (under `lock`, let go meanwhile): a share of
  // the run being read, else a new run begun where there is room (its first
  // share read, or the run handed over as the end or an error); false where
  // there is none: closed, ended, or no room.
  bool work(std::unique_lock<std::mutex>& lock) {
    if (s_->closing) return false;
    if (s_->open < 0) {
      if (s_->ended || s_->claimed - s_->taken >= ahead_) return false;
      const int64_t number = s_->claimed++;
      Wake w;
      if (!begin(number, &w)) {
        wake(lock, w);
        return true;
      }
      s_->open = number;
    }
    const int64_t number = s_->open;
    Reading& reading = s_->reading.at(number);  // stays in the map until its last share is in
    const int share = reading.next_share++;
    if (reading.next_share == shares_) s_->open = -1;
    lock.unlock();
    const auto rows = static_cast<int64_t>(reading.samples.size());
    const int64_t lo = rows * share / shares_, hi = rows * (share + 1) / shares_;
    RowsRead got;
    if (hi > lo) {
      got = read_rows(reading.samples.data() + lo, hi - lo,
                      static_cast<uint8_t*>(reading.block->data), rows, lo);
    }
    lock.lock();
    reading.shares[static_cast<size_t>(share)] = std::move(got);
    if (--reading.shares_left > 0) return true;
    Reading whole = std::move(reading);
    s_->reading.erase(number);
    lock.unlock();
    Run run = finish_run(std::move(whole));
    lock.lock();
    wake(lock, hand_over(number, std::move(run)));
    return true;
  }

  // The caller's piece of the reading while the run it takes next is not
  // read (under `lock`): as a reader's, on one kernel thread (its core
  // reads rather than waits). Out of memory ends the reading as a
  // reader's would: the caller then gets the runs handed over before it,
  // then the error.
  bool help(std::unique_lock<std::mutex>& lock) {
    if (!caller_reads_ || s_->fatal) return false;
    ++s_->helping;
    const int threads = set_calling_thread_threads(1);
    bool worked = false;
    try {
      worked = work(lock);
      if (worked) g_caller_shares.fetch_add(1, std::memory_order_relaxed);
    } catch (...) {  // out of memory: no other exception comes out of the reads
      if (!lock.owns_lock()) lock.lock();
      s_->fatal = true;
      s_->ended = true;
      s_->room.notify_all();  // the readers stop
    }
    set_calling_thread_threads(threads);
    if (--s_->helping == 0 && s_->closing) s_->ready.notify_all();  // stop() waits for it
    return worked;
  }

  // Run `number`'s micro-batches and samples into *reading; false where it
  // is the end (*run then nothing) or its positions pass 2^62 (*run the error).
  bool plan(int64_t number, Reading* reading, Run* run) const {
    const int64_t lo = number * run_length_;  // below 2^62 runs: the positions end first
    // the last micro-batch of the iteration whose positions stay below 2^62
    const int64_t last = (kMaxPosition - offset_ - m_) / stride_ - step0_;
    std::vector<int64_t> positions;
    for (int64_t idx = lo; idx < lo + run_length_; ++idx) {
      // micro-batch (first + every * block) * group + within, each product
      // checked before it is made
      const int64_t block = idx / group_, within = idx % group_;
      const int64_t room = last < within ? -1 : (last - within) / group_ - first_;
      if (room < 0 || block > room / every_) {
        if (count_ >= 0) break;  // past the end, which comes first
        run->error = Error::position;
        // as BatchOrder.sample_at says it: the micro-batch's largest position
        run->message = "positions: position " + last_position(block, within) +
                       " is out of range: positions are 0..2^62 - 1";
        return false;
      }
      const int64_t i = (first_ + every_ * block) * group_ + within;
      if (count_ >= 0 && i >= count_) break;  // the end
      reading->numbers.push_back(i);
      const int64_t base = (step0_ + i) * stride_ + offset_;
      for (int64_t q = 0; q < m_; ++q) positions.push_back(base + q);
    }
    if (reading->numbers.empty()) return false;  // the end
    reading->samples.resize(positions.size());
    batch_order_samples(positions.data(), reading->samples.data(),
                        static_cast<int64_t>(positions.size()), n_, seed_, shuffle_);
    return true;
  }

  // The largest position of micro-batch (first + every * block) * group +
  // within, in decimal, or "past 2^63" where it does not fit in int64 (the
  // micro-batch right after one whose positions fit always does, but for
  // sizes near 2^63).
  std::string last_position(int64_t block, int64_t within) const {
    // a * b + c of non-negative a, b, c into *out; false where it overflows
    const auto mul_add = [](int64_t a, int64_t b, int64_t c, int64_t* out) {
      constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
      if (b != 0 && a > (kMax - c) / b) return false;
      *out = a * b + c;
      return true;
    };
    int64_t i = 0, p = 0;
    if (!mul_add(every_, block, first_, &i) || !mul_add(i, group_, within, &i) ||
        i > std::numeric_limits<int64_t>::max() - step0_ ||
        !mul_add(i + step0_, stride_, offset_ + m_ - 1, &p)) {
      return "past 2^63";
    }
    return std::to_string(p);
  }

  // Rows first..first+count of a run's block of `rows` rows: samples
  // wanted[0..count) of the order's source. Needs no GIL.
  RowsRead read_rows(const int64_t* wanted, int64_t count, uint8_t* block, int64_t rows,
                     int64_t first) {
    if (blend_ != nullptr) return blend_->read_rows(wanted, count, block, rows, first, nullptr);
    RowsRead got;
    std::tie(got.result, got.status) =
        reader_->read_rows(wanted, count, block, rows, first, reader_->source(), nullptr);
    return got;
  }

  // One micro-batch read alone (of samples wanted[0..m)), into a block of its own.
  BatchRead read_alone(const int64_t* wanted) {
    if (blend_ == nullptr) return reader_->read(wanted, m_, m_, reader_->source(), nullptr);
    BatchRead r;
    r.rows = m_;
    r.part_rows = m_;
    r.block.reset(take_output_block(BatchLayout(m_, reader_->sequence_length()).total));
    take(blend_->read_rows(wanted, m_, static_cast<uint8_t*>(r.block->data), m_, 0, nullptr), &r);
    reader_->cut(&r);
    return r;
  }

  // A run whose shares are all in: read (one piece), or failed somewhere
  // and read again one micro-batch at a time.
  Run finish_run(Reading reading) {
    Run run;
    BatchRead whole;
    whole.rows = static_cast<int64_t>(reading.samples.size());
    whole.part_rows = m_;
    whole.block = std::move(reading.block);
    for (RowsRead& share : reading.shares) {
      BatchResult& got = share.result;
      if (share.status.kind != FileStatus::ok) whole.status = share.status;
      if (!share.message.empty()) whole.message = share.message;
      if (got.fault != BatchFault::none) whole.result.fault = got.fault;
      whole.result.max_seqlen = std::max(whole.result.max_seqlen, got.max_seqlen);
      whole.result.segments.insert(whole.result.segments.end(), got.segments.begin(),
                                   got.segments.end());
      whole.result.longest.insert(whole.result.longest.end(), got.longest.begin(),
                                  got.longest.end());
    }
    try {
      reader_->cut(&whole);
      if (whole.ok()) {
        run.pieces.push_back(
            Piece{std::move(reading.numbers), std::move(reading.samples), std::move(whole)});
        return run;
      }
      const auto k = static_cast<int64_t>(reading.numbers.size());
      // read again one micro-batch at a time: those before the failing one are given
      for (int64_t j = 0; j < k; ++j) {
        const int64_t* own = reading.samples.data() + j * m_;
        BatchRead alone = read_alone(own);
        if (!alone.ok()) {
          run.error = Error::read;
          run.failed = std::move(alone);
          return run;
        }
        run.pieces.push_back(Piece{{reading.numbers[static_cast<size_t>(j)]},
                                   std::vector<int64_t>(own, own + m_),
                                   std::move(alone)});
      }
    } catch (const std::bad_alloc&) {
      run.error = Error::memory;
    }
    return run;
  }

  py::object keep_;  // the reader, alive while the readers are
  GPTBatchReader* reader_;
  std::unique_ptr<BlendRows> blend_;  // a blend's rows, read by its corpora's readers
  const int64_t n_;
  const uint64_t seed_;
  const bool shuffle_;
  const int64_t step0_, stride_, offset_, m_, first_, every_, group_, count_, run_length_, ahead_;
  const bool caller_reads_;  // the caller reads shares while it waits (see help)
  const int shares_;  // the readers and the caller: a run's rows are read in as many shares
  const pid_t pid_;
  std::unique_ptr<Shared> s_ = std::make_unique<Shared>();
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
           "text"_a = py::none())
      .def("reads_alone", &GPTBatchReader::reads_alone);
  m.def("gpt_blend_batch", &blend_batch, "readers"_a, "dataset_index"_a, "dataset_sample_index"_a,
        "indices"_a, "part_rows"_a = 0);
  py::class_<GPTBatchAhead>(m, "GPTBatchAhead")
      .def(py::init<const py::object&, int64_t, uint64_t, bool, int64_t, int64_t, int64_t,
                    int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, bool,
                    const py::object&>(),
           "reader"_a, "n"_a, "seed"_a, "shuffle"_a, "step0"_a, "stride"_a, "offset"_a, "m"_a,
           "first"_a, "every"_a, "group"_a, "count"_a, "run_length"_a, "ahead"_a, "readers"_a,
           "threads"_a, "caller_reads"_a = true, "blend"_a = py::none())
      .def("next", &GPTBatchAhead::next)
      .def("close", &GPTBatchAhead::stop);
  m.def("gpt_batch_ahead_readers", [] { return g_ahead_readers.load(); });
  m.def("gpt_batch_ahead_caller_shares", [] { return g_caller_shares.load(); });
  m.def("document_tokens", &document_tokens, "lengths"_a, "documents"_a = py::none());
  m.def("sample_index", &sample_index, "lengths"_a, "document_index"_a, "sequence_length"_a,
        "extra"_a, "num_samples"_a, "wide"_a);
  m.def("gpt_indices", &gpt_indices, "lengths"_a, "documents"_a, "epochs"_a, "separate"_a,
        "samples_before_final"_a, "sequence_length"_a, "extra"_a, "num_samples"_a, "key"_a,
        "pos"_a, "wide_documents"_a, "wide_samples"_a, "wide_shuffle"_a);
}

}  // namespace posembed::bind
