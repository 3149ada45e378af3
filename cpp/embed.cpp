#include "embed.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "parallel.hpp"
#include "rowops.hpp"
#include "runtime.hpp"

namespace posembed {

namespace {

constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;

// SplitMix64's finaliser.
inline uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// h[m] = mix(key + (first + m + 1) * gamma) for m in [0, n): plain integer
// arithmetic, so every SIMD level gives the same bits.
inline void hash_pairs_body(uint64_t key, int64_t first, int64_t n, uint64_t* h) {
  const uint64_t base = key + (static_cast<uint64_t>(first) + 1) * kGamma;
  for (int64_t m = 0; m < n; ++m) h[m] = mix(base + static_cast<uint64_t>(m) * kGamma);
}

void hash_pairs_baseline(uint64_t key, int64_t first, int64_t n, uint64_t* h) {
  hash_pairs_body(key, first, n, h);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) void hash_pairs_avx2(uint64_t key, int64_t first, int64_t n,
                                                     uint64_t* h) {
  hash_pairs_body(key, first, n, h);
}
#endif

using HashFn = void (*)(uint64_t, int64_t, int64_t, uint64_t*);

// POSEMBED_SIMD=baseline forces the x86-64 baseline (tests compare the bits).
HashFn pick_hash() {
#if defined(__x86_64__) && defined(__GNUC__)
  const char* forced = std::getenv("POSEMBED_SIMD");
  const bool baseline = forced != nullptr && std::strcmp(forced, "baseline") == 0;
  __builtin_cpu_init();
  if (!baseline && __builtin_cpu_supports("avx2")) return hash_pairs_avx2;
#endif
  return hash_pairs_baseline;
}

const HashFn g_hash_pairs = pick_hash();

inline uint32_t low(uint64_t h) { return static_cast<uint32_t>(h); }
inline uint32_t high(uint64_t h) { return static_cast<uint32_t>(h >> 32); }

// Elements per block of the mask and dropout loops.
constexpr int64_t kBlock = 1024;

template <class S>
void embed_t(const RowsView& tokens, const int64_t* ids, int64_t rows, const RowsView& pos,
             const int64_t* positions, int64_t offset, int64_t period, const DropoutSpec& drop,
             S* out) {
  using C = typename Compute<S>::type;
  const int64_t cols = tokens.cols;
  const auto scale = static_cast<C>(drop.scale);
  const int64_t last_token = tokens.rows - 1;
  const int64_t last_pos = pos.rows - 1;
  const auto bytes = rows * cols * static_cast<int64_t>(sizeof(S));
  parallel_for(rows, threads_for_bytes(bytes), [&](int64_t begin, int64_t end, int) {
    std::vector<uint32_t> u(static_cast<size_t>(drop.active ? cols : 0));
    for (int64_t r = begin; r < end; ++r) {
      const int64_t id = std::clamp<int64_t>(ids[r], 0, last_token);
      const int64_t p =
          std::clamp<int64_t>(positions ? positions[r] : offset + r % period, 0, last_pos);
      const auto* a = reinterpret_cast<const S*>(tokens.data + id * tokens.row_stride);
      const auto* b = reinterpret_cast<const S*>(pos.data + p * pos.row_stride);
      S* dst = out + r * cols;
      // The next token row is a random read from memory: ask for it now, so
      // that its latency hides behind this row's work.
      if (r + 1 < end) {
        const int64_t next = std::clamp<int64_t>(ids[r + 1], 0, last_token);
        const char* row = tokens.data + next * tokens.row_stride;
        const auto row_bytes = cols * static_cast<int64_t>(sizeof(S));
        for (int64_t k = 0; k < row_bytes; k += 64) __builtin_prefetch(row + k);
      }
      if (drop.active) uniform_bits(drop.key, r * cols, cols, u.data());
      if constexpr (std::is_same_v<S, C>) {
        if (drop.active) {
          dropout_add(dst, a, b, u.data(), drop.threshold, scale, cols);
        } else {
          add(dst, a, b, cols);
        }
      } else {
        for (int64_t j = 0; j < cols; ++j) {
          const C s = Compute<S>::load(a[j]) + Compute<S>::load(b[j]);
          const C v = !drop.active ? s : u[static_cast<size_t>(j)] >= drop.threshold ? s * scale
                                                                                      : C(0);
          dst[j] = Compute<S>::store(v);
        }
      }
    }
  });
}

}  // namespace

uint64_t dropout_key(uint64_t seed) { return mix(seed); }

void uniform_bits(uint64_t key, int64_t first, int64_t n, uint32_t* u) {
  uint64_t h[kBlock / 2];
  int64_t e = first;
  const int64_t end = first + n;
  if (e < end && (e & 1)) {  // an odd first element is its pair's high half
    g_hash_pairs(key, e >> 1, 1, h);
    *u++ = high(h[0]);
    ++e;
  }
  while (end - e >= 2) {
    const int64_t pairs = std::min<int64_t>(kBlock / 2, (end - e) / 2);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    // Each hash's low half comes first in memory: hash straight into u.
    if (reinterpret_cast<uintptr_t>(u) % alignof(uint64_t) == 0) {
      g_hash_pairs(key, e >> 1, pairs, reinterpret_cast<uint64_t*>(u));
    } else
#endif
    {
      g_hash_pairs(key, e >> 1, pairs, h);
      for (int64_t m = 0; m < pairs; ++m) {
        u[2 * m] = low(h[m]);
        u[2 * m + 1] = high(h[m]);
      }
    }
    u += 2 * pairs;
    e += 2 * pairs;
  }
  if (e < end) {
    g_hash_pairs(key, e >> 1, 1, h);
    *u = low(h[0]);
  }
}

void dropout_mask(uint64_t key, uint32_t threshold, int64_t n, bool* mask) {
  parallel_for(n, threads_for_bytes(n), [&](int64_t begin, int64_t end, int) {
    uint32_t u[kBlock];
    for (int64_t b = begin; b < end; b += kBlock) {
      const int64_t len = std::min(kBlock, end - b);
      uniform_bits(key, b, len, u);
      for (int64_t k = 0; k < len; ++k) mask[b + k] = u[k] >= threshold;
    }
  }, 64);
}

void embed(const RowsView& tokens, const int64_t* ids, int64_t rows, const RowsView& pos,
           const int64_t* positions, int64_t offset, int64_t period, FloatKind kind,
           const DropoutSpec& dropout, char* out) {
  with_float_kind(kind, [&](auto s) {
    using S = decltype(s);
    embed_t<S>(tokens, ids, rows, pos, positions, offset, period, dropout,
               reinterpret_cast<S*>(out));
  });
}

}  // namespace posembed
