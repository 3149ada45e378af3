// Bindings of the pack family: the plan from the documents' lengths, and the
// cut of its rows into input ids, position ids and labels.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "bind.hpp"
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

template <class T>
PackRowsResult rows_for(bool wide, const PackSource& tokens, const std::vector<PackSource>& cols,
                        const I64& wanted, const I64& row_offsets, const I64& document,
                        const I64& start, const I64& length, const I64& document_lengths,
                        int64_t capacity, int64_t position_start, int64_t separator,
                        py::array& ids, py::array& positions, py::array* labels,
                        const std::vector<uint8_t*>& column_out, PackSegments* segments) {
  const auto run = [&](auto tag) {
    using P = decltype(tag);
    return posembed::pack_rows<T, P>(
        tokens, cols, wanted.data(), static_cast<int64_t>(wanted.size()), row_offsets.data(),
        static_cast<int64_t>(row_offsets.size()) - 1, static_cast<int64_t>(document.size()),
        document.data(), start.data(), length.data(), document_lengths.data(),
        static_cast<int64_t>(document_lengths.size()), capacity, static_cast<P>(position_start),
        static_cast<P>(separator), static_cast<P>(-100), static_cast<T*>(ids.mutable_data()),
        static_cast<P*>(positions.mutable_data()),
        labels != nullptr ? static_cast<P*>(labels->mutable_data()) : nullptr, column_out,
        segments);
  };
  return wide ? run(int64_t{}) : run(int32_t{});
}

// Rows `wanted` of a plan cut from `tokens` and `columns` (sources, see
// source_of). The caller (posembed.pack's plan) has checked that every
// source's documents have the plan's lengths, that the rows wanted are the
// plan's, and that position_start + capacity and separator fit the
// positions' dtype; the plan's arrays, the rows and the offsets are read
// once each and checked in the kernel. Returns (ids, positions, labels or
// None, [column arrays], (seq_lengths, row_segments, cu_seqlens, documents,
// starts)) or, on a fault, the tuple (kind, batch row, a, b, c) first and
// None for the rest.
py::tuple pack_cut(const py::tuple& tokens, const py::list& columns, const I64& wanted,
                   const I64& row_offsets, const I64& document, const I64& start,
                   const I64& length, const I64& document_lengths, int64_t capacity, bool wide,
                   bool with_labels, int64_t position_start, int64_t separator, bool reuse) {
  std::vector<py::object> keep;
  const Source tok = source_of(tokens, &keep);
  if (tok.dtype.kind() != 'i' && tok.dtype.kind() != 'u') {
    throw py::value_error("pack_cut: tokens must be integers");
  }
  std::vector<Source> cols;
  std::vector<PackSource> col_views;
  for (const auto& c : columns) {
    cols.push_back(source_of(c.cast<py::tuple>(), &keep));
    col_views.push_back(cols.back().view);
  }
  if (wanted.ndim() != 1 || capacity < 1 || document.size() != start.size() ||
      document.size() != length.size() || row_offsets.size() < 1) {
    throw py::value_error("pack_cut: inconsistent arguments");
  }
  const auto nwanted = static_cast<py::ssize_t>(wanted.size());
  const Shape shape{nwanted, capacity};
  const py::dtype pdt = wide ? py::dtype::of<int64_t>() : py::dtype::of<int32_t>();
  // the outputs share one block (each at a 64-byte boundary), reused by the
  // next call of the same shape once they are freed (see output_block)
  const auto cells = static_cast<int64_t>(nwanted) * capacity;
  const auto room = [&](const py::dtype& dt) {
    return (cells * static_cast<int64_t>(dt.itemsize()) + 63) / 64 * 64;
  };
  int64_t total = room(tok.dtype) + room(pdt) * (with_labels ? 2 : 1);
  for (const Source& c : cols) total += room(c.dtype);
  // (a batch of rows picked one by one: `reuse`; else arrays of their own)
  const py::capsule block = reuse ? output_block(total) : py::capsule();
  auto* next =
      reuse ? static_cast<uint8_t*>(static_cast<OutputBlock*>(block.get_pointer())->data) : nullptr;
  const auto carve = [&](const py::dtype& dt) {
    if (!reuse) return py::array(dt, shape);
    py::array a(dt, shape, {}, next, block);
    next += room(dt);
    return a;
  };
  py::array ids = carve(tok.dtype);
  py::array positions = carve(pdt);
  py::object labels_obj = py::none();
  py::array labels;
  if (with_labels) {
    labels = carve(pdt);
    labels_obj = labels;
  }
  py::list column_arrays;
  std::vector<uint8_t*> column_out;
  for (const Source& c : cols) {
    py::array out = carve(c.dtype);
    column_out.push_back(static_cast<uint8_t*>(out.mutable_data()));
    column_arrays.append(out);
  }
  py::array* lab = with_labels ? &labels : nullptr;
  const char kind = tok.dtype.kind();
  const auto item = tok.dtype.itemsize();
  PackRowsResult r;
  PackSegments segments;
  {
    py::gil_scoped_release nogil;
    const auto run = [&](auto tag) {
      using T = decltype(tag);
      return rows_for<T>(wide, tok.view, col_views, wanted, row_offsets, document, start, length,
                         document_lengths, capacity, position_start, separator, ids, positions,
                         lab, column_out, &segments);
    };
    if (kind == 'i') {
      r = item == 1   ? run(int8_t{})
          : item == 2 ? run(int16_t{})
          : item == 4 ? run(int32_t{})
                      : run(int64_t{});
    } else {
      r = item == 1   ? run(uint8_t{})
          : item == 2 ? run(uint16_t{})
          : item == 4 ? run(uint32_t{})
                      : run(uint64_t{});
    }
  }
  if (r.fault != PackRowsFault::none) {
    return py::make_tuple(py::make_tuple(static_cast<int>(r.fault), r.at, r.a, r.b, r.c),
                          py::none(), py::none(), py::none(), py::none());
  }
  const py::tuple sequences = py::make_tuple(
      to_array(std::move(segments.seq_lengths)), to_array(std::move(segments.row_segments)),
      to_array(std::move(segments.cu_seqlens)), to_array(std::move(segments.documents)),
      to_array(std::move(segments.starts)));
  return py::make_tuple(ids, positions, labels_obj, column_arrays, sequences);
}

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
  m.def("pack_unpack", &pack_unpack, "values"_a, "row_offsets"_a, "document"_a, "start"_a,
        "length"_a, "offset"_a, "placed"_a);
}

}  // namespace posembed::bind
