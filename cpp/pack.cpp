#include "pack.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <utility>

#include "fileio.hpp"
#include "mapped.hpp"
#include "parallel.hpp"
#include "runtime.hpp"

namespace posembed {

namespace {

// The smallest member >= v of a set of values 0..n-1, in a few word steps: a
// bit per value, and above it a bit per non-zero word, up to one word.
class NextSet {
 public:
  explicit NextSet(int64_t n) {
    int64_t words = std::max<int64_t>(1, (n + 63) / 64);
    for (;;) {
      levels_.emplace_back(static_cast<size_t>(words), 0);
      if (words == 1) break;
      words = (words + 63) / 64;
    }
  }

  void insert(int64_t v) {
    for (auto& level : levels_) {
      uint64_t& word = level[static_cast<size_t>(v >> 6)];
      const bool was_empty = word == 0;
      word |= uint64_t{1} << (v & 63);
      if (!was_empty) return;
      v >>= 6;
    }
  }

  void erase(int64_t v) {
    for (auto& level : levels_) {
      uint64_t& word = level[static_cast<size_t>(v >> 6)];
      word &= ~(uint64_t{1} << (v & 63));
      if (word != 0) return;
      v >>= 6;
    }
  }

  // The smallest member >= v, or -1.
  int64_t next(int64_t v) const {
    size_t lvl = 0;
    int64_t i = v;
    for (;;) {  // up: the first word at or after i's with a bit at or after i's
      if (lvl >= levels_.size()) return -1;
      const int64_t w = i >> 6;
      if (w >= static_cast<int64_t>(levels_[lvl].size())) return -1;
      const uint64_t bits = levels_[lvl][static_cast<size_t>(w)] & (~uint64_t{0} << (i & 63));
      if (bits != 0) {
        i = (w << 6) | __builtin_ctzll(bits);
        break;
      }
      i = w + 1;  // the next word, one level up
      ++lvl;
    }
    while (lvl > 0) {  // down: the first bit of each word on the way
      --lvl;
      i = (i << 6) | __builtin_ctzll(levels_[lvl][static_cast<size_t>(i)]);
    }
    return i;
  }

 private:
  std::vector<std::vector<uint64_t>> levels_;
};

// The pieces of every document, longest first (ties: document order, then
// piece order), by a counting sort over the lengths 1..capacity.
struct Pieces {
  std::vector<int64_t> document;
  std::vector<int64_t> start;
  std::vector<int32_t> length;
};

// Capacities up to this many tokens keep arrays indexed by length and by
// room (8 to 16 bytes each); larger ones sort and map what is there, so that
// memory follows the documents, not the capacity.
constexpr int64_t kDenseCapacity = int64_t{1} << 20;

Pieces sorted_pieces(const std::vector<int64_t>& lengths, int64_t capacity, PackSplit split) {
  const auto cap = static_cast<size_t>(capacity);
  const auto each = [&](auto&& piece) {
    for (size_t d = 0; d < lengths.size(); ++d) {
      const int64_t n = lengths[d];
      if (split == PackSplit::truncate || n <= capacity) {
        if (n > 0) piece(d, int64_t{0}, std::min(n, capacity));
        continue;
      }
      int64_t s = 0;
      for (; n - s >= capacity; s += capacity) piece(d, s, capacity);
      if (s < n) piece(d, s, n - s);
    }
  };
  if (capacity > kDenseCapacity) {  // a stable sort of the pieces, longest first
    Pieces p;
    each([&](size_t d, int64_t s, int64_t l) {
      p.document.push_back(static_cast<int64_t>(d));
      p.start.push_back(s);
      p.length.push_back(static_cast<int32_t>(l));
    });
    std::vector<size_t> order(p.length.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return p.length[a] > p.length[b]; });
    Pieces sorted;
    for (const size_t i : order) {
      sorted.document.push_back(p.document[i]);
      sorted.start.push_back(p.start[i]);
      sorted.length.push_back(p.length[i]);
    }
    return sorted;
  }
  std::vector<int64_t> at(cap + 2, 0);  // pieces of length l counted at at[l]
  each([&](size_t, int64_t, int64_t l) { ++at[static_cast<size_t>(l)]; });
  // where the pieces of each length start, the longest first
  int64_t total = 0;
  for (size_t l = cap; l >= 1; --l) {
    const int64_t count = at[l];
    at[l] = total;
    total += count;
  }
  Pieces p;
  p.document.resize(static_cast<size_t>(total));
  p.start.resize(static_cast<size_t>(total));
  p.length.resize(static_cast<size_t>(total));
  each([&](size_t d, int64_t s, int64_t l) {
    const auto i = static_cast<size_t>(at[static_cast<size_t>(l)]++);
    p.document[i] = static_cast<int64_t>(d);
    p.start[i] = s;
    p.length[i] = static_cast<int32_t>(l);
  });
  return p;
}

// Best fit: rows with room r < capacity wait in a first-in first-out queue
// per r; the smallest r that holds a piece comes from the set of non-empty
// queues.
// Best fit for large capacities: the rows waiting with each room, in a map
// from room to its queue (head, tail), searched for the least room >= a length.
std::vector<int64_t> best_fit_sparse(const Pieces& p, int64_t capacity, int64_t* rows) {
  std::map<int64_t, std::pair<int64_t, int64_t>> rooms;
  std::vector<int64_t> next;
  std::vector<int64_t> row_of(p.length.size());
  int64_t count = 0;
  for (size_t i = 0; i < p.length.size(); ++i) {
    const int64_t len = p.length[i];
    const auto found = rooms.lower_bound(len);
    int64_t row;
    int64_t left;
    if (found != rooms.end()) {
      row = found->second.first;
      left = found->first - len;
      const int64_t after = next[static_cast<size_t>(row)];
      if (after < 0) {
        rooms.erase(found);
      } else {
        found->second.first = after;
      }
    } else {
      row = count++;
      next.push_back(-1);
      left = capacity - len;
    }
    row_of[i] = row;
    if (left > 0) {
      next[static_cast<size_t>(row)] = -1;
      const auto [queue, fresh] = rooms.try_emplace(left, row, row);
      if (!fresh) {
        next[static_cast<size_t>(queue->second.second)] = row;
        queue->second.second = row;
      }
    }
  }
  *rows = count;
  return row_of;
}

std::vector<int64_t> best_fit(const Pieces& p, int64_t capacity, int64_t* rows) {
  if (capacity > kDenseCapacity) return best_fit_sparse(p, capacity, rows);
  const auto cap = static_cast<size_t>(capacity);
  std::vector<int64_t> head(cap, -1), tail(cap, -1), next;
  std::vector<int64_t> row_of(p.length.size());
  NextSet rooms(capacity);
  int64_t count = 0;
  for (size_t i = 0; i < p.length.size(); ++i) {
    const int64_t len = p.length[i];
    const int64_t room = len < capacity ? rooms.next(len) : -1;
    int64_t row;
    int64_t left;
    if (room >= 0) {
      const auto r = static_cast<size_t>(room);
      row = head[r];
      head[r] = next[static_cast<size_t>(row)];
      if (head[r] < 0) {
        tail[r] = -1;
        rooms.erase(room);
      }
      left = room - len;
    } else {
      row = count++;
      next.push_back(-1);
      left = capacity - len;
    }
    row_of[i] = row;
    if (left > 0) {
      const auto r = static_cast<size_t>(left);
      next[static_cast<size_t>(row)] = -1;
      if (tail[r] < 0) {
        head[r] = row;
        rooms.insert(left);
      } else {
        next[static_cast<size_t>(tail[r])] = row;
      }
      tail[r] = row;
    }
  }
  *rows = count;
  return row_of;
}

// First fit: a tree of the rows' largest room, searched for the first row
// whose room holds the piece.
std::vector<int64_t> first_fit(const Pieces& p, int64_t capacity, int64_t* rows) {
  size_t leaves = 1;
  while (leaves < std::max<size_t>(1, p.length.size())) leaves *= 2;
  std::vector<int32_t> tree(2 * leaves, 0);
  std::vector<int64_t> row_of(p.length.size());
  int64_t count = 0;
  for (size_t i = 0; i < p.length.size(); ++i) {
    const int32_t len = p.length[i];
    size_t node = 1;
    if (tree[1] >= len) {
      while (node < leaves) node = tree[2 * node] >= len ? 2 * node : 2 * node + 1;
    } else {
      node = leaves + static_cast<size_t>(count++);
      tree[node] = static_cast<int32_t>(capacity);
    }
    row_of[i] = static_cast<int64_t>(node - leaves);
    tree[node] -= len;
    for (node /= 2; node >= 1; node /= 2) tree[node] = std::max(tree[2 * node], tree[2 * node + 1]);
  }
  *rows = count;
  return row_of;
}

void wrapped(const std::vector<int64_t>& lengths, int64_t capacity, PackSplit split,
             PackPlan* plan) {
  plan->row_offsets.assign(1, 0);
  int64_t used = 0;  // tokens in the open row
  for (size_t d = 0; d < lengths.size(); ++d) {
    const int64_t n = split == PackSplit::truncate ? std::min(lengths[d], capacity) : lengths[d];
    for (int64_t s = 0; s < n;) {
      const int64_t take = std::min(n - s, capacity - used);
      plan->document.push_back(static_cast<int64_t>(d));
      plan->start.push_back(s);
      plan->length.push_back(take);
      plan->offset.push_back(used);
      s += take;
      used += take;
      if (used == capacity) {
        plan->row_offsets.push_back(static_cast<int64_t>(plan->document.size()));
        used = 0;
      }
    }
  }
  if (used > 0) plan->row_offsets.push_back(static_cast<int64_t>(plan->document.size()));
}

}  // namespace

void pack_plan(const int64_t* lengths, int64_t n, int64_t capacity, PackStrategy strategy,
               PackSplit split, PackPlan* plan) {
  // each length read once: the caller's array may change meanwhile
  std::vector<int64_t> own(static_cast<size_t>(n));
  for (int64_t d = 0; d < n; ++d) {
    own[static_cast<size_t>(d)] = std::max<int64_t>(0, read_once(lengths + d));
  }
  *plan = PackPlan{};
  if (strategy == PackStrategy::wrapped) {
    wrapped(own, capacity, split, plan);
    return;
  }
  const Pieces p = sorted_pieces(own, capacity, split);
  int64_t rows = 0;
  const std::vector<int64_t> row_of =
      strategy == PackStrategy::bfd ? best_fit(p, capacity, &rows) : first_fit(p, capacity, &rows);
  // rows in the order they opened, each row's entries in the order placed
  plan->row_offsets.assign(static_cast<size_t>(rows) + 1, 0);
  for (const int64_t r : row_of) ++plan->row_offsets[static_cast<size_t>(r) + 1];
  for (size_t r = 0; r < static_cast<size_t>(rows); ++r) {
    plan->row_offsets[r + 1] += plan->row_offsets[r];
  }
  const size_t entries = row_of.size();
  plan->document.resize(entries);
  plan->start.resize(entries);
  plan->length.resize(entries);
  plan->offset.resize(entries);
  std::vector<int64_t> cursor(plan->row_offsets.begin(), plan->row_offsets.end() - 1);
  std::vector<int64_t> filled(static_cast<size_t>(rows), 0);
  for (size_t i = 0; i < entries; ++i) {
    const auto r = static_cast<size_t>(row_of[i]);
    const auto e = static_cast<size_t>(cursor[r]++);
    plan->document[e] = p.document[i];
    plan->start[e] = p.start[i];
    plan->length[e] = p.length[i];
    plan->offset[e] = filled[r];
    filled[r] += p.length[i];
  }
}

namespace {

// Items [s, s + n) of document d of `src` into `to`; a fault kind and its
// values, or none. The document's bounds are read once and checked.
struct Copied {
  PackRowsFault fault = PackRowsFault::none;
  int64_t a = 0, b = 0, c = 0;
};

// `want` is the plan's length of document d (0 <= d < the plan's documents).
Copied copy_items(const PackSource& src, int64_t source, int64_t d, int64_t want, int64_t s,
                  int64_t n, uint8_t* to) {
  Copied c;
  if (d < 0 || d >= src.ndocs) {
    c.fault = PackRowsFault::plan;
    return c;
  }
  // the caller's offsets may be a corpus's own array: each read once, then checked
  const int64_t a = read_once(src.doc_offsets + d), b = read_once(src.doc_offsets + d + 1);
  if (b - a != want && 0 <= a && a <= b) {  // not the document the plan was made with
    c.fault = PackRowsFault::length;
    c.a = source;
    c.b = d;
    c.c = b - a;
    return c;
  }
  if (!(0 <= a && a <= b && b <= src.nitems && 0 <= s && n >= 0 && s <= b - a - n)) {
    c.fault = PackRowsFault::plan;
    return c;
  }
  const int64_t bytes = n * src.item;
  if (src.memory != nullptr) {
    std::memcpy(to, src.memory + (a + s) * src.item, static_cast<size_t>(bytes));
    return c;
  }
  int64_t ended = 0;
  const int err = read_mapped(src.fd, src.map, src.map_size, to, bytes,
                              src.file_offset + (a + s) * src.item, &ended);
  if (err == -1) {
    c.fault = PackRowsFault::ended;
    c.a = source;
    c.b = ended;
  } else if (err != 0) {
    c.fault = PackRowsFault::io;
    c.a = source;
    c.b = err;
  } else if (src.swap) {
    byteswap_items(to, n, src.item);
  }
  return c;
}

// Asks for the first bytes of items [s, s + n) of document d of `src` to
// be brought into cache ahead of their copy: a row's pieces lie at random
// places in a file larger than the cache, and each piece's first lines
// would otherwise wait on memory one after another. Values are read once
// and only bound the hint (a prefetch never faults): the copy checks them.
void prefetch_items(const PackSource& src, int64_t d, int64_t s, int64_t n) {
  if (d < 0 || d >= src.ndocs || n <= 0 || s < 0) return;
  const int64_t a = read_once(src.doc_offsets + d);
  if (a < 0 || a > src.nitems || s > src.nitems - a) return;
  constexpr int64_t kAhead = 2048;  // the hardware prefetcher follows from there
  const int64_t bytes = std::min(std::min(n, src.nitems - a - s) * src.item, kAhead);
  const uint8_t* from = nullptr;
  if (src.memory != nullptr) {
    from = src.memory + (a + s) * src.item;
  } else if (src.map != nullptr) {
    const int64_t at = src.file_offset + (a + s) * src.item;
    if (at < 0 || at > src.map_size - bytes) return;
    from = src.map + at;
  }
  if (from == nullptr) return;
  for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(from + b, 0, 2);
}

void fill_items(uint8_t* to, const uint8_t* pad, int64_t item, int64_t n) {
  bool zero = true;
  for (int64_t k = 0; k < item; ++k) zero = zero && pad[k] == 0;
  if (zero) {
    std::memset(to, 0, static_cast<size_t>(n * item));
    return;
  }
  for (int64_t j = 0; j < n; ++j) std::memcpy(to + j * item, pad, static_cast<size_t>(item));
}

// Whether every value of T fits P.
template <class T, class P>
constexpr bool fits_all() {
  using TL = std::numeric_limits<T>;
  using PL = std::numeric_limits<P>;
  if (TL::is_signed) return TL::digits <= PL::digits;
  return TL::digits <= PL::digits;
}

}  // namespace

template <class T, class P>
PackRowsResult pack_rows(const PackSource& tokens, const std::vector<PackSource>& columns,
                         const int64_t* wanted, int64_t nwanted, const int64_t* row_offsets,
                         int64_t nrows, int64_t nentries, const int64_t* document,
                         const int64_t* start, const int64_t* length,
                         const int64_t* document_lengths, int64_t ndocs, int64_t capacity,
                         P position_start, P separator, P ignore, T* ids, P* positions,
                         P* labels, const std::vector<uint8_t*>& column_out,
                         PackSegments* segments) {
  PackRowsResult result;
  *segments = PackSegments{};
  segments->row_segments.push_back(0);
  segments->cu_seqlens.push_back(0);
  if (nwanted <= 0) return result;
  // position_start, +1, +2, ...: every sequence's positions are a copy of its first n
  std::vector<P> iota(static_cast<size_t>(capacity));
  for (size_t j = 0; j < iota.size(); ++j) iota[j] = static_cast<P>(position_start + static_cast<P>(j));
  const P* counting = iota.data();
  int64_t per_token = static_cast<int64_t>(sizeof(T) + 2 * sizeof(P));
  for (const PackSource& c : columns) per_token += c.item;
  const int64_t bytes = nwanted * capacity * per_token;
  std::mutex first_mutex;
  const auto note = [&](int64_t i, PackRowsFault fault, int64_t a, int64_t b, int64_t c) {
    const std::lock_guard<std::mutex> lock(first_mutex);
    if (result.at < 0 || i < result.at) {
      result.fault = fault;
      result.at = i;
      result.a = a;
      result.b = b;
      result.c = c;
    }
  };
  const auto ncols = static_cast<int64_t>(columns.size());
  // Hints only (a prefetch never faults; the copies check every value):
  // batch row i's documents' offsets and lengths, or its pieces.
  const auto ahead = [&](int64_t i, bool pieces) {
    const int64_t r = read_once(wanted + i);
    if (r < 0 || r >= nrows) return;
    const int64_t e0 = std::max<int64_t>(read_once(row_offsets + r), 0);
    const int64_t e1 = std::min(read_once(row_offsets + r + 1), nentries);
    for (int64_t e = e0; e < e1; ++e) {
      const int64_t d = read_once(document + e);
      if (d < 0 || d >= ndocs) continue;
      if (pieces) {
        const int64_t s = read_once(start + e), n = read_once(length + e);
        prefetch_items(tokens, d, s, n);
        for (const PackSource& c : columns) prefetch_items(c, d, s, n);
      } else {
        __builtin_prefetch(document_lengths + d, 0, 2);
        if (d < tokens.ndocs) __builtin_prefetch(tokens.doc_offsets + d, 0, 2);
        for (const PackSource& c : columns) {
          if (d < c.ndocs) __builtin_prefetch(c.doc_offsets + d, 0, 2);
        }
      }
    }
  };
  // Rows lo..hi (a chunk's next kWarmRows), their entries and their
  // documents' offsets asked for all at once, each step's loads independent
  // of one another (memory serves many at a time, where a row at a time
  // would wait on each).
  constexpr int64_t kWarmRows = 16;
  const auto warm = [&](int64_t lo, int64_t hi) {
    for (int64_t k = lo; k < hi; ++k) {
      const int64_t r = read_once(wanted + k);
      if (r >= 0 && r < nrows) __builtin_prefetch(row_offsets + r, 0, 2);
    }
    for (int64_t k = lo; k < hi; ++k) {
      const int64_t r = read_once(wanted + k);
      const int64_t e = r >= 0 && r < nrows ? read_once(row_offsets + r) : -1;
      if (e < 0 || e >= nentries) continue;
      __builtin_prefetch(document + e, 0, 2);
      __builtin_prefetch(start + e, 0, 2);
      __builtin_prefetch(length + e, 0, 2);
    }
    for (int64_t k = lo; k < hi; ++k) ahead(k, false);
  };
  parallel_for(nwanted, threads_for_bytes(bytes), [&](int64_t lo, int64_t hi, int) {
    for (int64_t i = lo; i < hi; ++i) {
      const int64_t r = read_once(wanted + i);
      if (r < 0 || r >= nrows) {
        note(i, PackRowsFault::row, r, 0, 0);
        continue;
      }
      T* row_ids = ids + i * capacity;
      P* row_pos = positions + i * capacity;
      P* row_labels = labels != nullptr ? labels + i * capacity : nullptr;
      const int64_t e0 = read_once(row_offsets + r), e1 = read_once(row_offsets + r + 1);
      // Memory ahead of the copies: the chunk's offsets first, then the
      // pieces of the next row while this one is copied.
      if ((i - lo) % kWarmRows == 0) warm(i, std::min(i + kWarmRows, hi));
      if (i + 1 < hi) ahead(i + 1, true);
      Copied bad;
      if (!(0 <= e0 && e0 <= e1 && e1 <= nentries)) bad.fault = PackRowsFault::plan;
      int64_t used = 0;
      for (int64_t e = e0; bad.fault == PackRowsFault::none && e < e1; ++e) {
        const int64_t d = read_once(document + e), s = read_once(start + e);
        const int64_t n = read_once(length + e);
        if (!(n >= 1 && n <= capacity - used && 0 <= d && d < ndocs)) {
          bad.fault = PackRowsFault::plan;
          break;
        }
        const int64_t want = document_lengths[d];
        bad = copy_items(tokens, 0, d, want, s, n, reinterpret_cast<uint8_t*>(row_ids + used));
        for (int64_t k = 0; bad.fault == PackRowsFault::none && k < ncols; ++k) {
          const PackSource& c = columns[static_cast<size_t>(k)];
          uint8_t* to = column_out[static_cast<size_t>(k)] + (i * capacity + used) * c.item;
          bad = copy_items(c, k + 1, d, want, s, n, to);
        }
        if (bad.fault != PackRowsFault::none) break;
        std::memcpy(row_pos + used, counting, static_cast<size_t>(n) * sizeof(P));
        if (row_labels != nullptr) {
          const T* src = row_ids + used;
          row_labels[used] = separator;
          if constexpr (!fits_all<T, P>()) {
            for (int64_t j = 1; j < n; ++j) {
              if (src[j] > static_cast<T>(std::numeric_limits<P>::max()) ||
                  (std::numeric_limits<T>::is_signed &&
                   src[j] < static_cast<T>(std::numeric_limits<P>::min()))) {
                bad.fault = PackRowsFault::token;
                bad.b = static_cast<int64_t>(static_cast<uint64_t>(src[j]));
                break;
              }
            }
            if (bad.fault != PackRowsFault::none) break;
          }
          for (int64_t j = 1; j < n; ++j) row_labels[used + j] = static_cast<P>(src[j]);
        }
        used += n;
      }
      if (bad.fault != PackRowsFault::none) {
        note(i, bad.fault, bad.fault == PackRowsFault::plan ? r : bad.a, bad.b, bad.c);
        continue;
      }
      const int64_t rest = capacity - used;
      fill_items(reinterpret_cast<uint8_t*>(row_ids + used), tokens.pad, tokens.item, rest);
      for (int64_t k = 0; k < ncols; ++k) {
        const PackSource& c = columns[static_cast<size_t>(k)];
        fill_items(column_out[static_cast<size_t>(k)] + (i * capacity + used) * c.item, c.pad,
                   c.item, rest);
      }
      std::memcpy(row_pos + used, counting, static_cast<size_t>(rest) * sizeof(P));
      if (row_labels != nullptr) std::fill(row_labels + used, row_labels + capacity, ignore);
    }
  });
  if (result.fault != PackRowsFault::none) return result;
  // the rows' sequences, in order (the rows and the plan checked above)
  int64_t flat = 0;
  for (int64_t i = 0; i < nwanted; ++i) {
    const int64_t r = wanted[i];
    const int64_t e0 = row_offsets[r], e1 = row_offsets[r + 1];
    int64_t used = 0;
    for (int64_t e = e0; e < e1; ++e) {
      segments->seq_lengths.push_back(static_cast<int32_t>(length[e]));
      segments->documents.push_back(document[e]);
      segments->starts.push_back(start[e]);
      used += length[e];
      flat += length[e];
      segments->cu_seqlens.push_back(static_cast<int32_t>(flat));
    }
    if (used < capacity) {
      segments->seq_lengths.push_back(static_cast<int32_t>(capacity - used));
      segments->documents.push_back(-1);
      segments->starts.push_back(0);
      flat += capacity - used;
      segments->cu_seqlens.push_back(static_cast<int32_t>(flat));
    }
    segments->row_segments.push_back(static_cast<int64_t>(segments->seq_lengths.size()));
  }
  return result;
}

PackCutFault pack_unpack(const uint8_t* values, int64_t item, const int64_t* row_offsets,
                         int64_t nentries, const int64_t* document, const int64_t* start,
                         const int64_t* length, const int64_t* offset, int64_t rows,
                         int64_t capacity, const int64_t* placed, int64_t ndocs, uint8_t* out) {
  std::atomic<int64_t> first_bad{-1};
  const int64_t bytes = rows * capacity * item;
  parallel_for(rows, threads_for_bytes(bytes), [&](int64_t lo, int64_t hi, int) {
    for (int64_t r = lo; r < hi; ++r) {
      const int64_t e0 = read_once(row_offsets + r), e1 = read_once(row_offsets + r + 1);
      bool ok = 0 <= e0 && e0 <= e1 && e1 <= nentries;
      for (int64_t e = e0; ok && e < e1; ++e) {
        const int64_t d = read_once(document + e), s = read_once(start + e);
        const int64_t n = read_once(length + e), at = read_once(offset + e);
        ok = 0 <= d && d < ndocs && 0 <= at && n >= 0 && n <= capacity - at && 0 <= s;
        if (!ok) break;
        const int64_t begin = placed[d], end = placed[d + 1];
        ok = 0 <= begin && begin <= end && end <= placed[ndocs] && s <= end - begin - n;
        if (!ok) break;
        std::memcpy(out + (begin + s) * item, values + (r * capacity + at) * item,
                    static_cast<size_t>(n * item));
      }
      if (!ok) {
        int64_t seen = first_bad.load();
        while ((seen < 0 || r < seen) && !first_bad.compare_exchange_weak(seen, r)) {
        }
      }
    }
  });
  PackCutFault fault;
  fault.row = first_bad.load();
  return fault;
}

#define POSEMBED_PACK_ROWS(T, P)                                                               \
  template PackRowsResult pack_rows<T, P>(                                                      \
      const PackSource&, const std::vector<PackSource>&, const int64_t*, int64_t, const int64_t*, \
      int64_t, int64_t, const int64_t*, const int64_t*, const int64_t*, const int64_t*, int64_t,  \
      int64_t, P, P, P, T*, P*, P*, const std::vector<uint8_t*>&, PackSegments*);
#define POSEMBED_PACK_ROWS_BOTH(T) POSEMBED_PACK_ROWS(T, int32_t) POSEMBED_PACK_ROWS(T, int64_t)
POSEMBED_PACK_ROWS_BOTH(int8_t)
POSEMBED_PACK_ROWS_BOTH(uint8_t)
POSEMBED_PACK_ROWS_BOTH(int16_t)
POSEMBED_PACK_ROWS_BOTH(uint16_t)
POSEMBED_PACK_ROWS_BOTH(int32_t)
POSEMBED_PACK_ROWS_BOTH(uint32_t)
POSEMBED_PACK_ROWS_BOTH(int64_t)
POSEMBED_PACK_ROWS_BOTH(uint64_t)
#undef POSEMBED_PACK_ROWS_BOTH
#undef POSEMBED_PACK_ROWS

}  // namespace posembed
