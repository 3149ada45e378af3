#include "batch_order.hpp"

#include "parallel.hpp"
#include "runtime.hpp"

namespace posembed {
namespace {

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

  // Where j goes (j < n). Each round maps the 2^bits domain onto itself one
  // to one ((L, R) -> (R, L ^ F(R))), so the cycle through j comes back below
  // n; the domain is under 2n (4 for n = 2): under 2 rounds of walking on average.
  int64_t operator()(int64_t j) const {
    uint64_t x = static_cast<uint64_t>(j);
    do {
      for (int r = 0; r < kRounds; ++r) {
        const uint64_t left = x >> low_;
        const uint64_t right = x & low_mask_;
        x = (right << high_) | (left ^ (mix(right ^ keys_[r]) & high_mask_));
      }
    } while (x >= n_);
    return static_cast<int64_t>(x);
  }

 private:
  uint64_t n_;
  uint64_t seed_;
  int low_ = 0, high_ = 0;
  uint64_t low_mask_ = 0, high_mask_ = 0;
  uint64_t keys_[kRounds] = {};
  uint64_t epoch_ = 0;
  bool have_epoch_ = false;
};

inline int64_t sample_at(EpochShuffle& shuffle, int64_t p, int64_t n, bool shuffled) {
  const int64_t j = p % n;
  if (!shuffled || n <= 1) return j;
  shuffle.set_epoch(static_cast<uint64_t>(p / n));
  return shuffle(j);
}

// Below this many samples a call runs on the calling thread.
constexpr int64_t kGranule = 4096;

}  // namespace

void batch_order_rows(int64_t* out, int64_t rows, int64_t width, int64_t first, int64_t stride,
                      int64_t n, uint64_t seed, bool shuffle) {
  const int64_t total = rows * width;
  parallel_for(
      total, get_num_threads(),
      [&](int64_t begin, int64_t end, int) {
        EpochShuffle perm(n, seed);
        int64_t r = begin / width, t = begin % width;
        for (int64_t k = begin; k < end; ++k) {
          out[k] = sample_at(perm, first + r * stride + t, n, shuffle);
          if (++t == width) {
            t = 0;
            ++r;
          }
        }
      },
      kGranule);
}

void batch_order_samples(const int64_t* positions, int64_t* out, int64_t count, int64_t n,
                         uint64_t seed, bool shuffle) {
  parallel_for(
      count, get_num_threads(),
      [&](int64_t begin, int64_t end, int) {
        EpochShuffle perm(n, seed);
        for (int64_t k = begin; k < end; ++k) out[k] = sample_at(perm, positions[k], n, shuffle);
      },
      kGranule);
}

}  // namespace posembed
