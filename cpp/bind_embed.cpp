// Bindings of the embed family: embed (token rows plus position rows, then
// dropout, in one pass) and dropout_mask (the mask it applies).
#include <algorithm>

#include "bind.hpp"
#include "embed.hpp"
#include "random.hpp"

namespace posembed::bind {
namespace {

using namespace pybind11::literals;

// Where each row takes its position (see PositionRows): `given` broadcast to
// the ids' shape, which the Python layer has checked (this is the
// memory-safety check).
PositionRows broadcast_positions(const py::array& given, const py::array& ids) {
  const auto rank = ids.ndim();
  const auto tokens = rank > 0 ? static_cast<int64_t>(ids.shape(rank - 1)) : 1;
  // given's extent along axis k of the ids, its shape aligned to the right
  auto extent = [&](py::ssize_t k) {
    const py::ssize_t axis = k - (rank - given.ndim());
    return axis >= 0 ? static_cast<int64_t>(given.shape(axis)) : 1;
  };
  bool fits = given.ndim() <= rank;
  for (py::ssize_t k = 0; fits && k < rank; ++k) {
    fits = extent(k) == 1 || extent(k) == static_cast<int64_t>(ids.shape(k));
  }
  if (!fits) throw py::value_error("embed: positions must broadcast to the ids' shape");
  const int64_t per_token = rank > 0 ? extent(rank - 1) : 1;
  const int64_t per_sequence = rank > 1 ? extent(0) : 1;
  return {nullptr, 0, std::max<int64_t>(tokens, 1), per_sequence == 1 ? 0 : per_token,
          per_token == 1 ? 0 : 1};
}

// ids and positions: C-contiguous native integers of any dtype, checked in
// range here before anything is written (the kernel clamps its reads all the
// same). Without positions, token t of each sequence takes position offset + t.
py::array embed(const py::array& tokens, const py::array& pos, FloatKind kind,
                const py::array& ids, const py::object& positions_obj, int64_t offset,
                bool active, uint64_t seed, uint32_t threshold, double scale,
                const py::object& out_obj, int64_t first_row) {
  const RowsView tv = float_rows(tokens, kind);
  const RowsView pv = float_rows(pos, kind);
  const PositionsView id_view = positions_view(ids, "token_ids");
  const int64_t rows = id_view.count;
  if (tv.cols != pv.cols || (rows > 0 && (tv.rows < 1 || pv.rows < 1))) {
    throw py::value_error("embed: tables must share their columns and have rows");
  }
  if (ids.ndim() < 1 || ids.ndim() > 2) throw py::value_error("embed: ids must be 1-D or 2-D");
  const bool given = !positions_obj.is_none();
  py::array positions;
  PositionsView pos_view{nullptr, IntKind::i64, 0};
  PositionRows where{nullptr, offset, std::max<int64_t>(ids.shape(ids.ndim() - 1), 1), 0, 1};
  if (given) {
    positions = positions_obj.cast<py::array>();
    pos_view = positions_view(positions, "positions");
    where = broadcast_positions(positions, ids);
  } else if (rows > 0 && (offset < 0 || offset > pv.rows - where.tokens)) {
    throw py::value_error("embed: offset and the ids' length do not fit the position table");
  }
  Shape shape(ids.shape(), ids.shape() + ids.ndim());
  shape.push_back(tokens.shape(1));
  py::array out = output_array(out_obj, tokens.dtype(), shape);
  if (first_row < 0 || first_row > (int64_t{1} << 62) / std::max<int64_t>(tv.cols, 1)) {
    throw py::value_error("embed: first_row must be in 0..2^62 / d");
  }
  const DropoutSpec drop{active, random_key(seed), threshold, scale, first_row};
  char* dst = static_cast<char*>(out.mutable_data());
  OutOfRange bad_id{-1, 0};
  OutOfRange bad_position{-1, 0};
  {
    const KernelGilRelease nogil(static_cast<int64_t>(out.nbytes()));
    // every id, then every position, before anything is written
    bad_id = find_out_of_range(id_view, tv.rows);
    if (given && !bad_id.found()) bad_position = find_out_of_range(pos_view, pv.rows);
    if (!bad_id.found() && !bad_position.found() && rows > 0) {
      std::vector<int64_t> id_storage;
      std::vector<int64_t> position_storage;
      if (given) where.given = int64_positions(pos_view, position_storage);
      posembed::embed(tv, int64_positions(id_view, id_storage), rows, pv, where, kind, drop, dst);
    }
  }
  if (bad_id.found()) {
    raise_out_of_range(ids, {"token_ids", "token id", "token_table"}, tv.rows, bad_id);
  }
  if (bad_position.found()) {
    raise_out_of_range(positions, {"positions", "position", "pos_table"}, pv.rows, bad_position);
  }
  return out;
}

// The float kind of a plain float16/32/64 table, or -1.
int plain_float_kind(const py::handle& a) {
  if (!plain(a)) return -1;
  const auto arr = py::reinterpret_borrow<py::array>(a);
  if (arr.ndim() != 2 || arr.dtype().kind() != 'f') return -1;
  switch (arr.itemsize()) {
    case 2: return static_cast<int>(FloatKind::f16);
    case 4: return static_cast<int>(FloatKind::f32);
    case 8: return static_cast<int>(FloatKind::f64);
    default: return -1;
  }
}

// embed's common call, token_table[ids] + pos_table[arange(T)] into a new
// array, with the checks it needs alone: None when the arguments are not
// that call (other types, layouts or shapes, or too few position rows),
// which the Python layer then checks in full and reports.
py::object embed_plain(const py::object& tokens, const py::object& ids, const py::object& pos) {
  const int kind = plain_float_kind(tokens);
  if (kind < 0 || plain_float_kind(pos) != kind || !plain(ids)) return py::none();
  const auto t = py::reinterpret_borrow<py::array>(tokens);
  const auto p = py::reinterpret_borrow<py::array>(pos);
  const auto i = py::reinterpret_borrow<py::array>(ids);
  const char id_kind = i.dtype().kind();
  if ((id_kind != 'i' && id_kind != 'u') || i.ndim() < 1 || i.ndim() > 2) return py::none();
  if (!t.dtype().is(p.dtype()) || t.shape(1) != p.shape(1) || t.shape(0) < 1 ||
      i.shape(i.ndim() - 1) > p.shape(0)) {
    return py::none();
  }
  return embed(t, p, static_cast<FloatKind>(kind), i, py::none(), 0, false, 0, 0, 1.0,
               py::none(), 0);
}

py::array dropout_mask(int64_t count, uint64_t seed, uint32_t threshold) {
  if (count < 0) throw py::value_error("dropout_mask: negative size");
  py::array_t<bool> mask(count);
  bool* dst = mask.mutable_data();
  {
    py::gil_scoped_release nogil;
    posembed::dropout_mask(random_key(seed), threshold, count, dst);
  }
  return mask;
}

}  // namespace

void bind_embed(py::module_& m) {
  m.def("embed", &embed, "tokens"_a, "pos"_a, "kind"_a, "ids"_a, "positions"_a, "offset"_a,
        "active"_a, "seed"_a, "threshold"_a, "scale"_a, "out"_a = py::none(),
        "first_row"_a = 0);
  m.def("embed_plain", &embed_plain, "tokens"_a, "ids"_a, "pos"_a);
  m.def("dropout_mask", &dropout_mask, "count"_a, "seed"_a, "threshold"_a);
}

}  // namespace posembed::bind
