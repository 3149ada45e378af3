// Bindings of the pack family: the plan from the documents' lengths, and the
// cut of its rows into input ids, position ids and labels.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "bind.hpp"
#include "mapped.hpp"
#include "pack.hpp"

namespace posembed::bind {
namespace {

using namespace pybind11::literals;

// The vector's own buffer as an array (no copy): the array owns the vector.
template <class V>
py::array_t<V> to_array(std::vector<V>&& values) {
  auto* owner = new std::vector<V>(std::move(values));
  const py::capsule free_it(owner, [](void* p) { delete static_cast<std::vector<V>*>(p); });
  return py::array_t<V>(static_cast<py::ssize_t>(owner->size()), owner->data(), free_it);
}

py::tuple pack_plan(const I64& lengths, int64_t capacity, int strategy, int split) {
  if (lengths.ndim() != 1) throw py::value_error("pack_plan: lengths must be 1-D");
  if (capacity < 1 || capacity > INT32_MAX) {
    throw py::value_error("pack_plan: capacity must be in 1..2^31 - 1");
  }
  if (strategy < 0 || strategy > 2 || split < 0 || split > 1) {
    throw py::value_error("pack_plan: unknown strategy or split");
  }
  PackPlan plan;
  {
    py::gil_scoped_release nogil;
    posembed::pack_plan(lengths.data(), static_cast<int64_t>(lengths.size()), capacity,
                        static_cast<PackStrategy>(strategy), static_cast<PackSplit>(split), &plan);
  }
  return py::make_tuple(to_array(std::move(plan.row_offsets)), to_array(std::move(plan.document)),
                        to_array(std::move(plan.start)), to_array(std::move(plan.length)),
                        to_array(std::move(plan.offset)));
}

// One per-token source as Python gives it: (array or None, (fd, file
// offset, swap, FileMap or None) or None, doc_offsets, pad bytes, dtype,
// item count). The
// array, the offsets and the pad bytes stay alive in `keep` for the call.
struct Source {
  PackSource view;
  py::dtype dtype;
};

Source source_of(const py::tuple& t, std::vector<py::object>* keep) {
  if (t.size() != 6) throw py::value_error("pack_cut: a source is a 6-tuple");
  Source out{PackSource{}, py::dtype::from_args(t[4])};
  const py::dtype& dt = out.dtype;
  if (dt.attr("hasobject").cast<bool>() || !dt.attr("isnative").cast<bool>() ||
      dt.itemsize() < 1 || dt.itemsize() > 16) {
    throw py::value_error("pack_cut: a source's dtype must be a native number dtype");
  }
  out.view.item = static_cast<int64_t>(dt.itemsize());
  const auto offsets = t[2].cast<I64>();
  keep->push_back(offsets);
  if (offsets.ndim() != 1 || offsets.size() < 1) {
    throw py::value_error("pack_cut: a source's offsets must be 1-D");
  }
  out.view.doc_offsets = offsets.data();
  out.view.ndocs = static_cast<int64_t>(offsets.size()) - 1;
  const auto pad = t[3].cast<py::bytes>();
  keep->push_back(pad);
  const std::string_view pad_bytes(pad);
  if (static_cast<int64_t>(pad_bytes.size()) != out.view.item) {
    throw py::value_error("pack_cut: a source's pad must be one item");
  }
  out.view.pad = reinterpret_cast<const uint8_t*>(pad_bytes.data());
  out.view.nitems = t[5].cast<int64_t>();
  if (!t[0].is_none()) {
    const auto a = t[0].cast<py::array>();
    keep->push_back(a);
    if (a.ndim() != 1 || !c_contiguous(a) || !a.dtype().is(dt) ||
        static_cast<int64_t>(a.size()) < out.view.nitems) {
      throw py::value_error("pack_cut: a source array must be 1-D, C-contiguous, of its dtype");
    }
    out.view.memory = static_cast<const uint8_t*>(a.data());
  } else {
    const auto file = t[1].cast<py::tuple>();
    if (file.size() != 4) throw py::value_error("pack_cut: a file is (fd, offset, swap, mapping)");
    out.view.fd = file[0].cast<int>();
    out.view.file_offset = file[1].cast<int64_t>();
    out.view.swap = file[2].cast<bool>();
    if (out.view.fd < 0 || out.view.file_offset < 0) {
      throw py::value_error("pack_cut: a file source needs fd and file_offset >= 0");
    }
    keep->push_back(file[3]);  // the file's mapping, or None
    std::tie(out.view.map, out.view.map_size) = mapped_view(file[3]);
  }
  if (out.view.nitems < 0) throw py::value_error("pack_cut: a source's count must be >= 0");
  return out;
}

// A plan's arrays as the cut kernel reads them (each value read once and
// checked there).
struct PlanView {
  const int64_t* row_offsets;
  int64_t nrows;
  const int64_t* document;
  const int64_t* start;
  const int64_t* length;
  int64_t nentries;
  const int64_t* document_lengths;
  int64_t ndocs;
};

PlanView plan_view(const I64& row_offsets, const I64& document, const I64& start,
                   const I64& length, const I64& document_lengths) {
  if (document.size() != start.size() || document.size() != length.size() ||
      row_offsets.ndim() != 1 || row_offsets.size() < 1) {
    throw py::value_error("pack_cut: inconsistent arguments");
  }
  return PlanView{row_offsets.data(),
                  static_cast<int64_t>(row_offsets.size()) - 1,
                  document.data(),
                  start.data(),
                  length.data(),
                  static_cast<int64_t>(document.size()),
                  document_lengths.data(),
                  static_cast<int64_t>(document_lengths.size())};
}

// How the rows are cut: the row width, the positions' dtype (int64 when
// `wide`), labels or not, the first position and the separator label.
struct CutOptions {
  int64_t capacity = 1;
  bool wide = true;
  bool labels = false;
  int64_t position_start = 0;
  int64_t separator = -100;
};

// The output arrays of a cut of `rows` rows and where the kernel writes them.
struct CutOutputs {
  py::array ids, positions;
  py::object labels = py::none();
  py::list columns;
  void* ids_data = nullptr;
  void* positions_data = nullptr;
  void* labels_data = nullptr;
  std::vector<uint8_t*> column_data;
};

// The arrays of a cut: on one block reused by the next call of the same
// shape once they are freed (`reuse`, for a batch of rows picked one by one;
// see output_block), else arrays of their own.
CutOutputs cut_outputs(const py::dtype& token_dtype, const std::vector<py::dtype>& column_dtypes,
                       int64_t rows, const CutOptions& o, bool reuse) {
  const Shape shape{static_cast<py::ssize_t>(rows), static_cast<py::ssize_t>(o.capacity)};
  const py::dtype pdt = o.wide ? py::dtype::of<int64_t>() : py::dtype::of<int32_t>();
  const int64_t cells = rows * o.capacity;
  const auto room = [&](const py::dtype& dt) {
    return (cells * static_cast<int64_t>(dt.itemsize()) + 63) / 64 * 64;
  };
  int64_t total = room(token_dtype) + room(pdt) * (o.labels ? 2 : 1);
  for (const py::dtype& c : column_dtypes) total += room(c);
  const py::capsule block = reuse ? output_block(total) : py::capsule();
  auto* next =
      reuse ? static_cast<uint8_t*>(static_cast<OutputBlock*>(block.get_pointer())->data) : nullptr;
  const auto carve = [&](const py::dtype& dt) {
    if (!reuse) return py::array(dt, shape);
    py::array a(dt, shape, {}, next, block);
    next += room(dt);
    return a;
  };
  CutOutputs out;
  out.ids = carve(token_dtype);
  out.ids_data = out.ids.mutable_data();
  out.positions = carve(pdt);
  out.positions_data = out.positions.mutable_data();
  if (o.labels) {
    py::array labels = carve(pdt);
    out.labels_data = labels.mutable_data();
    out.labels = labels;
  }
  for (const py::dtype& c : column_dtypes) {
    py::array a = carve(c);
    out.column_data.push_back(static_cast<uint8_t*>(a.mutable_data()));
    out.columns.append(a);
  }
  return out;
}

// The kernel over rows wanted[0..nwanted) (no GIL needed): tokens of
// `kind` ('i' or 'u') and `item` bytes.
PackRowsResult run_cut(const PackSource& tokens, char kind, int64_t item,
                       const std::vector<PackSource>& columns, const int64_t* wanted,
                       int64_t nwanted, const PlanView& plan, const CutOptions& o,
                       const CutOutputs& out, PackSegments* segments) {
  const auto typed = [&](auto token) {
    using T = decltype(token);
    const auto run = [&](auto position) {
      using P = decltype(position);
      return posembed::pack_rows<T, P>(
          tokens, columns, wanted, nwanted, plan.row_offsets, plan.nrows, plan.nentries,
          plan.document, plan.start, plan.length, plan.document_lengths, plan.ndocs, o.capacity,
          static_cast<P>(o.position_start), static_cast<P>(o.separator), static_cast<P>(-100),
          static_cast<T*>(out.ids_data), static_cast<P*>(out.positions_data),
          static_cast<P*>(out.labels_data), out.column_data, segments);
    };
    return o.wide ? run(int64_t{}) : run(int32_t{});
  };
  if (kind == 'i') {
    return item == 1   ? typed(int8_t{})
           : item == 2 ? typed(int16_t{})
           : item == 4 ? typed(int32_t{})
                       : typed(int64_t{});
  }
  return item == 1   ? typed(uint8_t{})
         : item == 2 ? typed(uint16_t{})
         : item == 4 ? typed(uint32_t{})
                     : typed(uint64_t{});
}

// What a cut returns: (ids, positions, labels or None, [column arrays],
// (seq_lengths, row_segments, cu_seqlens, documents, starts)) or, on a
// fault, the tuple (kind, batch row, a, b, c) first and None for the rest.
py::tuple cut_result(const PackRowsResult& r, CutOutputs& out, PackSegments& segments) {
  if (r.fault != PackRowsFault::none) {
    return py::make_tuple(py::make_tuple(static_cast<int>(r.fault), r.at, r.a, r.b, r.c),
                          py::none(), py::none(), py::none(), py::none());
  }
  const py::tuple sequences = py::make_tuple(
      to_array(std::move(segments.seq_lengths)), to_array(std::move(segments.row_segments)),
      to_array(std::move(segments.cu_seqlens)), to_array(std::move(segments.documents)),
      to_array(std::move(segments.starts)));
  return py::make_tuple(out.ids, out.positions, out.labels, out.columns, sequences);
}

// Rows `wanted` of a plan cut from `tokens` and `columns` (sources, see
// source_of). The caller (posembed.pack's plan) has checked that every
// source's documents have the plan's lengths, that the rows wanted are the
// plan's, and that position_start + capacity and separator fit the
// positions' dtype; the plan's arrays, the rows and the offsets are read
// once each and checked in the kernel. Returns as cut_result.
py::tuple pack_cut(const py::tuple& tokens, const py::list& columns, const I64& wanted,
                   const I64& row_offsets, const I64& document, const I64& start,
                   const I64& length, const I64& document_lengths, int64_t capacity, bool wide,
                   bool with_labels, int64_t position_start, int64_t separator, bool reuse) {
  std::vector<py::object> keep;
  const Source tok = source_of(tokens, &keep);
  if (tok.dtype.kind() != 'i' && tok.dtype.kind() != 'u') {
    throw py::value_error("pack_cut: tokens must be integers");
  }
  std::vector<PackSource> col_views;
  std::vector<py::dtype> col_dtypes;
  for (const auto& c : columns) {
    const Source col = source_of(c.cast<py::tuple>(), &keep);
    col_views.push_back(col.view);
    col_dtypes.push_back(col.dtype);
  }
  if (wanted.ndim() != 1 || capacity < 1) throw py::value_error("pack_cut: inconsistent arguments");
  const PlanView plan = plan_view(row_offsets, document, start, length, document_lengths);
  const CutOptions o{capacity, wide, with_labels, position_start, separator};
  const auto nwanted = static_cast<int64_t>(wanted.size());
  CutOutputs out = cut_outputs(tok.dtype, col_dtypes, nwanted, o, reuse);
  PackRowsResult r;
  PackSegments segments;
  {
    py::gil_scoped_release nogil;
    r = run_cut(tok.view, tok.dtype.kind(), static_cast<int64_t>(tok.dtype.itemsize()), col_views,
                wanted.data(), nwanted, plan, o, out, &segments);
  }
  return cut_result(r, out, segments);
}

// One indexed-dataset file a PackCutReader reads: where (its path, the
// stamp it must keep), what (its dtype, its items at file_offset, count of
// them, byte-swapped when `swap`), its documents' offsets and its pad item.
struct CutFile {
  std::string path;
  FileStamp stamp;
  std::unique_ptr<StableFile> file;
  py::dtype dtype;
  I64 offsets;
  py::bytes pad;
  PackSource view;  // fd and mapping set per call
};

// Batches of rows of one plan cut from one token file and its column files,
// with one set of options, checked once (by the caller, as PackPlan.cut
// checks them); each call checks its row numbers, opens each file for the
// call (see StableFile) and checks it again after the reads. `sources`: the
// tokens' first, then each column's, as (path, dtype, file_offset, swap,
// count, stamp or None, offsets, pad bytes). A call returns as cut_result,
// or None where the rows are not all row numbers of an integer dtype (the
// caller then checks them, naming what is wrong) or the batch holds 2^31
// tokens or more.
class PackCutReader {
 public:
  PackCutReader(I64 row_offsets, I64 document, I64 start, I64 length, I64 document_lengths,
                int64_t capacity, bool wide, bool labels, int64_t position_start,
                int64_t separator, const py::list& sources)
      : arrays_{std::move(row_offsets), std::move(document), std::move(start), std::move(length),
                std::move(document_lengths)},
        plan_(plan_view(arrays_[0], arrays_[1], arrays_[2], arrays_[3], arrays_[4])),
        options_{capacity, wide, labels, position_start, separator} {
    if (capacity < 1 || capacity > INT32_MAX || sources.empty()) {
      throw py::value_error("pack_cut: inconsistent arguments");
    }
    for (const auto& given : sources) {
      const auto t = given.cast<py::tuple>();
      if (t.size() != 8) throw py::value_error("pack_cut: a file source is an 8-tuple");
      auto f = std::make_unique<CutFile>();
      f->path = t[0].cast<std::string>();
      f->dtype = py::dtype::from_args(t[1]);
      const char kind = f->dtype.kind();
      if (f->dtype.attr("hasobject").cast<bool>() || !f->dtype.attr("isnative").cast<bool>() ||
          f->dtype.itemsize() < 1 || f->dtype.itemsize() > 16 ||
          (files_.empty() && kind != 'i' && kind != 'u')) {
        throw py::value_error("pack_cut: a source's dtype must be a native number dtype");
      }
      f->view.item = static_cast<int64_t>(f->dtype.itemsize());
      f->view.file_offset = t[2].cast<int64_t>();
      f->view.swap = t[3].cast<bool>();
      f->view.nitems = t[4].cast<int64_t>();
      f->stamp = file_stamp(t[5]);
      f->offsets = t[6].cast<I64>();
      f->pad = t[7].cast<py::bytes>();
      const std::string_view pad(f->pad);
      if (f->view.file_offset < 0 || f->view.nitems < 0 || f->offsets.ndim() != 1 ||
          f->offsets.size() < 1 || static_cast<int64_t>(pad.size()) != f->view.item) {
        throw py::value_error("pack_cut: inconsistent file source");
      }
      f->view.doc_offsets = f->offsets.data();
      f->view.ndocs = static_cast<int64_t>(f->offsets.size()) - 1;
      f->view.pad = reinterpret_cast<const uint8_t*>(pad.data());
      f->file = std::make_unique<StableFile>(f->path, f->stamp);
      files_.push_back(std::move(f));
    }
    for (size_t k = 1; k < files_.size(); ++k) column_dtypes_.push_back(files_[k]->dtype);
  }

  py::object call(const py::array& rows) {
    std::vector<int64_t> wanted;
    if (!index_numbers(rows, plan_.nrows, &wanted)) return py::none();
    const auto n = static_cast<int64_t>(wanted.size());
    if (n > INT32_MAX / options_.capacity) return py::none();
    const CutFile& tok = *files_[0];
    CutOutputs out = cut_outputs(tok.dtype, column_dtypes_, n, options_, true);
    std::vector<PackSource> views;
    for (const auto& f : files_) views.push_back(f->view);
    std::vector<std::shared_ptr<const OpenFile>> open(files_.size());  // held to the end
    FileStatus status;
    size_t failed = 0;
    PackRowsResult r;
    PackSegments segments;
    {
      py::gil_scoped_release nogil;
      for (size_t k = 0; k < files_.size() && status.kind == FileStatus::ok; ++k) {
        status = files_[k]->file->open(&open[k]);
        failed = k;
        if (open[k] != nullptr) set_file(*open[k], &views[k].fd, &views[k].map, &views[k].map_size);
      }
      if (status.kind == FileStatus::ok) {
        const std::vector<PackSource> columns(views.begin() + 1, views.end());
        r = run_cut(views[0], tok.dtype.kind(), views[0].item, columns, wanted.data(), n, plan_,
                    options_, out, &segments);
        // rewritten during the reads: old and new items would mix
        for (size_t k = 0; k < files_.size() && r.fault == PackRowsFault::none &&
                           status.kind == FileStatus::ok;
             ++k) {
          status = files_[k]->file->check(*open[k]);
          failed = k;
        }
      }
    }
    if (status.kind != FileStatus::ok) {
      raise_file_status(status, files_[failed]->path, files_[failed]->stamp);
    }
    return cut_result(r, out, segments);
  }

 private:
  I64 arrays_[5];
  PlanView plan_;
  CutOptions options_;
  std::vector<std::unique_ptr<CutFile>> files_;
  std::vector<py::dtype> column_dtypes_;
};

// Per-token values of a whole plan's rows (C-contiguous, shape (rows,
// capacity, ...)) in document order; `placed` (ndocs + 1, the caller's
// own) says where each document's placed tokens begin.
py::array pack_unpack(const py::array& values, const I64& row_offsets, const I64& document,
                      const I64& start, const I64& length, const I64& offset, const I64& placed) {
  const auto rows = static_cast<int64_t>(row_offsets.size()) - 1;
  if (values.ndim() < 2 || !c_contiguous(values) || values.shape(0) != rows || rows < 0 ||
      placed.size() < 1) {
    throw py::value_error("pack_unpack: values must be C-contiguous (rows, capacity, ...)");
  }
  const auto capacity = static_cast<int64_t>(values.shape(1));
  int64_t item = static_cast<int64_t>(values.itemsize());
  Shape shape{static_cast<py::ssize_t>(placed.data()[placed.size() - 1])};
  for (py::ssize_t k = 2; k < values.ndim(); ++k) {
    item *= static_cast<int64_t>(values.shape(k));
    shape.push_back(values.shape(k));
  }
  py::array out(values.dtype(), shape);
  PackCutFault fault;
  {
    py::gil_scoped_release nogil;
    fault = posembed::pack_unpack(
        static_cast<const uint8_t*>(values.data()), item, row_offsets.data(),
        static_cast<int64_t>(document.size()), document.data(), start.data(), length.data(),
        offset.data(), rows, capacity, placed.data(), static_cast<int64_t>(placed.size()) - 1,
        static_cast<uint8_t*>(out.mutable_data()));
  }
  if (fault.row >= 0) {
    throw py::value_error("the plan's row " + std::to_string(fault.row) +
                          " does not fit its documents or its capacity (was the plan changed?)");
  }
  return out;
}

}  // namespace

void bind_pack(py::module_& m) {
  m.def("pack_plan", &pack_plan, "lengths"_a, "capacity"_a, "strategy"_a, "split"_a);
  m.def("pack_cut", &pack_cut, "tokens"_a, "columns"_a, "wanted"_a, "row_offsets"_a,
        "document"_a, "start"_a, "length"_a, "document_lengths"_a, "capacity"_a, "wide"_a,
        "labels"_a, "position_start"_a, "separator"_a, "reuse"_a = false);
  py::class_<PackCutReader>(m, "PackCutReader")
      .def(py::init<I64, I64, I64, I64, I64, int64_t, bool, bool, int64_t, int64_t,
                    const py::list&>(),
           "row_offsets"_a, "document"_a, "start"_a, "length"_a, "document_lengths"_a,
           "capacity"_a, "wide"_a, "labels"_a, "position_start"_a, "separator"_a, "sources"_a)
      .def("__call__", &PackCutReader::call, "rows"_a);
  m.def("pack_unpack", &pack_unpack, "values"_a, "row_offsets"_a, "document"_a, "start"_a,
        "length"_a, "offset"_a, "placed"_a);
}

}  // namespace posembed::bind
