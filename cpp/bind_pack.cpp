// Bindings of the pack family: the plan from the documents' lengths, and the
// cut of its rows into input ids, position ids and labels.
#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bind.hpp"
#include "pack.hpp"

namespace posembed::bind {
namespace {

using namespace pybind11::literals;

// The vector's own buffer as an array (no copy): the array owns the vector.
py::array_t<int64_t> to_array(std::vector<int64_t>&& values) {
  auto* owner = new std::vector<int64_t>(std::move(values));
  const py::capsule free_it(owner, [](void* p) { delete static_cast<std::vector<int64_t>*>(p); });
  return py::array_t<int64_t>(static_cast<py::ssize_t>(owner->size()), owner->data(), free_it);
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

template <class T, class P>
PackCutFault typed_cut(const py::array& tokens, const I64& doc_offsets, const I64& row_offsets,
                       const I64& document, const I64& start, const I64& length, int64_t r0,
                       int64_t r1, int64_t capacity, uint64_t pad, py::array& ids,
                       py::array& positions, py::array* labels) {
  return posembed::pack_cut<T, P>(
      static_cast<const T*>(tokens.data()), static_cast<int64_t>(tokens.size()),
      doc_offsets.data(), static_cast<int64_t>(doc_offsets.size()) - 1, row_offsets.data(),
      static_cast<int64_t>(document.size()), document.data(), start.data(), length.data(), r0, r1,
      capacity, static_cast<T>(pad), static_cast<P>(-100), static_cast<T*>(ids.mutable_data()),
      static_cast<P*>(positions.mutable_data()),
      labels != nullptr ? static_cast<P*>(labels->mutable_data()) : nullptr);
}

template <class T>
PackCutFault cut_for(bool wide, const py::array& tokens, const I64& doc_offsets,
                     const I64& row_offsets, const I64& document, const I64& start,
                     const I64& length, int64_t r0, int64_t r1, int64_t capacity, uint64_t pad,
                     py::array& ids, py::array& positions, py::array* labels) {
  return wide ? typed_cut<T, int64_t>(tokens, doc_offsets, row_offsets, document, start, length,
                                      r0, r1, capacity, pad, ids, positions, labels)
              : typed_cut<T, int32_t>(tokens, doc_offsets, row_offsets, document, start, length,
                                      r0, r1, capacity, pad, ids, positions, labels);
}

// The caller (posembed.pack's plan) has checked that doc_offsets are its
// own, rising, inside tokens and equal to the plan's document lengths; the
// plan's arrays are read once each and checked in the kernel.
py::tuple pack_cut(const py::array& tokens, const I64& doc_offsets, const I64& row_offsets,
                   const I64& document, const I64& start, const I64& length, int64_t r0,
                   int64_t r1, int64_t capacity, uint64_t pad, bool wide, bool with_labels) {
  if (tokens.ndim() != 1 || !c_contiguous(tokens) || tokens.dtype().kind() == 'f' ||
      (tokens.dtype().kind() != 'i' && tokens.dtype().kind() != 'u') ||
      !tokens.dtype().attr("isnative").cast<bool>()) {
    throw py::value_error("pack_cut: tokens must be a 1-D C-contiguous native integer array");
  }
  const auto nrows = static_cast<int64_t>(row_offsets.size()) - 1;
  if (doc_offsets.size() < 1 || r0 < 0 || r0 > r1 || r1 > nrows || capacity < 1 ||
      document.size() != start.size() || document.size() != length.size()) {
    throw py::value_error("pack_cut: inconsistent arguments");
  }
  const Shape shape{r1 - r0, capacity};
  py::array ids(tokens.dtype(), shape);
  const py::dtype pdt = wide ? py::dtype::of<int64_t>() : py::dtype::of<int32_t>();
  py::array positions(pdt, shape);
  py::object labels_obj = py::none();
  py::array labels;
  if (with_labels) {
    labels = py::array(pdt, shape);
    labels_obj = labels;
  }
  py::array* lab = with_labels ? &labels : nullptr;
  const char kind = tokens.dtype().kind();
  const auto item = tokens.itemsize();
  PackCutFault fault;
  {
    py::gil_scoped_release nogil;
    const auto run = [&](auto tag) {
      using T = decltype(tag);
      return cut_for<T>(wide, tokens, doc_offsets, row_offsets, document, start, length, r0, r1,
                        capacity, pad, ids, positions, lab);
    };
    if (kind == 'i') {
      fault = item == 1   ? run(int8_t{})
              : item == 2 ? run(int16_t{})
              : item == 4 ? run(int32_t{})
                          : run(int64_t{});
    } else {
      fault = item == 1   ? run(uint8_t{})
              : item == 2 ? run(uint16_t{})
              : item == 4 ? run(uint32_t{})
                          : run(uint64_t{});
    }
  }
  if (fault.row >= 0) {
    throw py::value_error("the plan's row " + std::to_string(fault.row) +
                          " does not fit its documents or its capacity (was the plan changed?)");
  }
  return py::make_tuple(ids, positions, labels_obj);
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
  m.def("pack_cut", &pack_cut, "tokens"_a, "doc_offsets"_a, "row_offsets"_a, "document"_a,
        "start"_a, "length"_a, "r0"_a, "r1"_a, "capacity"_a, "pad"_a, "wide"_a, "labels"_a);
  m.def("pack_unpack", &pack_unpack, "values"_a, "row_offsets"_a, "document"_a, "start"_a,
        "length"_a, "offset"_a, "placed"_a);
}

}  // namespace posembed::bind
