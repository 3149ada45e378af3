// Bindings of the embed family: embed (token rows plus position rows, then
// dropout, in one pass) and dropout_mask (the mask it applies).
#include <algorithm>

#include "bind.hpp"
#include "embed.hpp"
#include "random.hpp"

namespace posembed::bind {
namespace {

using namespace pybind11::literals;

// ids and positions: int64, checked in range by the Python layer (the
// kernel clamps its reads all the same). Without positions, row r's position
// is offset + r % period.
py::array embed(const py::array& tokens, const py::array& pos, FloatKind kind, const I64& ids,
                const py::object& positions_obj, int64_t offset, int64_t period, bool active,
                uint64_t seed, uint32_t threshold, double scale, const py::object& out_obj,
                int64_t first_row) {
  const RowsView tv = float_rows(tokens, kind);
  const RowsView pv = float_rows(pos, kind);
  const auto rows = static_cast<int64_t>(ids.size());
  if (tv.cols != pv.cols || (rows > 0 && (tv.rows < 1 || pv.rows < 1))) {
    throw py::value_error("embed: tables must share their columns and have rows");
  }
  const int64_t* positions = nullptr;
  I64 pos_arr;
  if (!positions_obj.is_none()) {
    pos_arr = positions_obj.cast<I64>();
    const auto count = static_cast<int64_t>(pos_arr.size());
    if (rows > 0 && (period < 1 || count != period || rows % period != 0)) {
      throw py::value_error("embed: positions must repeat with the period");
    }
    positions = pos_arr.data();
  } else if (rows > 0 && (period < 1 || offset < 0 || offset + period > pv.rows ||
                          rows % period != 0)) {
    throw py::value_error("embed: offset and period do not fit the position table");
  }
  Shape shape(ids.shape(), ids.shape() + ids.ndim());
  shape.push_back(tokens.shape(1));
  py::array out = output_array(out_obj, tokens.dtype(), shape);
  if (first_row < 0 || first_row > (int64_t{1} << 62) / std::max<int64_t>(tv.cols, 1)) {
    throw py::value_error("embed: first_row must be in 0..2^62 / d");
  }
  const DropoutSpec drop{active, random_key(seed), threshold, scale, first_row};
  char* dst = static_cast<char*>(out.mutable_data());
  bool ids_ok = true;
  bool pos_ok = true;
  {
    py::gil_scoped_release nogil;
    // Checked before anything is written (the kernel also clamps its reads).
    ids_ok = all_in_range(ids.data(), rows, tv.rows);
    pos_ok = positions == nullptr || all_in_range(positions, std::min(rows, period), pv.rows);
    if (ids_ok && pos_ok) {
      posembed::embed(tv, ids.data(), rows, pv, positions, offset, period, kind, drop, dst);
    }
  }
  if (!ids_ok) raise_out_of_range("token_ids");
  if (!pos_ok) raise_out_of_range("positions");
  return out;
}

py::array dropout_mask(int64_t n, uint64_t seed, uint32_t threshold) {
  if (n < 0) throw py::value_error("dropout_mask: negative size");
  py::array_t<bool> mask(n);
  bool* dst = mask.mutable_data();
  {
    py::gil_scoped_release nogil;
    posembed::dropout_mask(random_key(seed), threshold, n, dst);
  }
  return mask;
}

}  // namespace

void bind_embed(py::module_& m) {
  m.def("embed", &embed, "tokens"_a, "pos"_a, "kind"_a, "ids"_a, "positions"_a, "offset"_a,
        "period"_a, "active"_a, "seed"_a, "threshold"_a, "scale"_a, "out"_a = py::none(),
        "first_row"_a = 0);
  m.def("dropout_mask", &dropout_mask, "n"_a, "seed"_a, "threshold"_a);
}

}  // namespace posembed::bind
