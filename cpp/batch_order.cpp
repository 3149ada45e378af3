#include "batch_order.hpp"

#include <algorithm>

#include "parallel.hpp"
#include "runtime.hpp"
#include "simd.hpp"

// One copy of the block rounds per SIMD level (see simd.hpp).
#define POSEMBED_SIMD_SOURCE "batch_order.simd.inc"
#include "simd_levels.inc"
#undef POSEMBED_SIMD_SOURCE

namespace posembed {
namespace {

using RoundsFn = void (*)(uint64_t*, int64_t, const uint64_t*, int, int, int, uint64_t, uint64_t);

RoundsFn pick_rounds() {
#if POSEMBED_SIMD_DISPATCH
  switch (simd_level()) {
    case SimdLevel::avx512:
      return simd_avx512::feistel_rounds;
    case SimdLevel::avx2:
      return simd_avx2::feistel_rounds;
    case SimdLevel::baseline:
      break;
  }
#endif
  return simd_baseline::feistel_rounds;
}

// The level, chosen once at load.
const RoundsFn g_rounds = pick_rounds();

constexpr int kRounds = 6;
constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;

// splitmix64: its step and its finaliser.
inline uint64_t mix(uint64_t x) {
  uint64_t z = x + kGolden;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// One epoch's shuffle of 0..n-1 (n >= 2).
class EpochShuffle {
 public:
  EpochShuffle(int64_t n, uint64_t seed) : n_(static_cast<uint64_t>(n)), seed_(mix(seed)) {
    int bits = 2;
    while ((uint64_t{1} << bits) < n_) ++bits;
    high_ = bits / 2;
    low_ = bits - high_;
    low_mask_ = (uint64_t{1} << low_) - 1;
    high_mask_ = (uint64_t{1} << high_) - 1;
  }

  void set_epoch(uint64_t epoch) {
    if (have_epoch_ && epoch == epoch_) return;
    const uint64_t base = mix(seed_ ^ epoch);
    for (int r = 0; r < kRounds; ++r) keys_[r] = mix(base + static_cast<uint64_t>(r));
    epoch_ = epoch;
    have_epoch_ = true;
  }

  // Where j[0], ..., j[count - 1] go (all < n, count <= kBlock), into
  // out: the rounds run over the whole block at once (a loop the compiler
  // vectorises), then those that land at n or past it go round again, together.
  void block(const uint64_t* j, int64_t count, int64_t* out) const {
    uint64_t x[kBlock];
    for (int64_t k = 0; k < count; ++k) x[k] = j[k];
    g_rounds(x, count, keys_, kRounds, low_, high_, low_mask_, high_mask_);
    // Cycle-walking: each pass gathers those still at n or past it.
    int64_t at[kBlock];
    uint64_t y[kBlock];
    int64_t left = 0;
    for (int64_t k = 0; k < count; ++k) {
      at[left] = k;
      y[left] = x[k];
      left += x[k] >= n_ ? 1 : 0;
    }
    while (left > 0) {
      g_rounds(y, left, keys_, kRounds, low_, high_, low_mask_, high_mask_);
      int64_t still = 0;
      for (int64_t t = 0; t < left; ++t) {
        x[at[t]] = y[t];
        at[still] = at[t];
        y[still] = y[t];
        still += y[t] >= n_ ? 1 : 0;
      }
      left = still;
    }
    for (int64_t k = 0; k < count; ++k) out[k] = static_cast<int64_t>(x[k]);
  }

  static constexpr int64_t kBlock = 256;

 private:
  uint64_t n_;
  uint64_t seed_;
  int low_ = 0, high_ = 0;
  uint64_t low_mask_ = 0, high_mask_ = 0;
  uint64_t keys_[kRounds] = {};
  uint64_t epoch_ = 0;
  bool have_epoch_ = false;
};

// Below this many samples a call runs on the calling thread.
constexpr int64_t kGranule = 4096;

// Collects the samples of one epoch to shuffle as a block, written to
// consecutive outputs: add() them in output order, then flush().
class Blocks {
 public:
  Blocks(int64_t n, uint64_t seed, int64_t* out) : perm_(n, seed), out_(out) {}

  void add(int64_t epoch, int64_t j) {
    if (count_ == EpochShuffle::kBlock || (count_ > 0 && epoch != epoch_)) flush();
    epoch_ = epoch;
    j_[count_++] = static_cast<uint64_t>(j);
  }

  void flush() {
    if (count_ == 0) return;
    perm_.set_epoch(static_cast<uint64_t>(epoch_));
    perm_.block(j_, count_, out_);
    out_ += count_;
    count_ = 0;
  }

 private:
  EpochShuffle perm_;
  int64_t* out_;
  uint64_t j_[EpochShuffle::kBlock];
  int64_t count_ = 0, epoch_ = 0;
};

}  // namespace

void batch_order_rows(int64_t* out, int64_t rows, int64_t width, int64_t first, int64_t stride,
                      int64_t n, uint64_t seed, bool shuffle) {
  const int64_t total = rows * width;
  const bool shuffled = shuffle && n > 1;
  parallel_for(
      total, get_num_threads(),
      [&](int64_t begin, int64_t end, int) {
        Blocks blocks(n, seed, out + begin);
        // positions are consecutive within a row: one division per row
        for (int64_t k = begin; k < end;) {
          const int64_t r = k / width, t = k % width;
          const int64_t count = std::min(end - k, width - t);
          const int64_t p = first + r * stride + t;
          int64_t epoch = p / n, j = p % n;
          for (int64_t i = 0; i < count; ++i) {
            if (shuffled) {
              blocks.add(epoch, j);
            } else {
              out[k + i] = j;
            }
            if (++j == n) {
              j = 0;
              ++epoch;
            }
          }
          k += count;
        }
        if (shuffled) blocks.flush();
      },
      kGranule);
}

void batch_order_samples(const int64_t* positions, int64_t* out, int64_t count, int64_t n,
                         uint64_t seed, bool shuffle) {
  const bool shuffled = shuffle && n > 1;
  parallel_for(
      count, get_num_threads(),
      [&](int64_t begin, int64_t end, int) {
        Blocks blocks(n, seed, out + begin);
        for (int64_t k = begin; k < end; ++k) {
          const int64_t p = positions[k];
          if (shuffled) {
            blocks.add(p / n, p % n);
          } else {
            out[k] = p % n;
          }
        }
        if (shuffled) blocks.flush();
      },
      kGranule);
}

}  // namespace posembed
