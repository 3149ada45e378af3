#include "blend.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "simd.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace posembed {
namespace {

// The datasets still drawn, in ascending order of their ids: weight, count
// so far (a double, as Megatron subtracts it; exact below 2^53), id, and, for
// an exhaustive blend, the samples each has left to give.
struct Datasets {
  std::vector<double> weight;
  std::vector<double> count;
  std::vector<int16_t> id;
  std::vector<int64_t> left;
};

}  // namespace
}  // namespace posembed

// One copy of the draw per SIMD level (see simd.hpp).
#define POSEMBED_SIMD_SOURCE "blend.simd.inc"
#include "simd_levels.inc"
#undef POSEMBED_SIMD_SOURCE

namespace posembed {

namespace {

template <bool Exhaustive>
void dispatch(Datasets& a, int64_t total, int16_t* dataset_index, int64_t* sample_index) {
#if POSEMBED_SIMD_DISPATCH
  switch (simd_level()) {
    case SimdLevel::avx512:
      return simd_avx512::draw<Exhaustive>(a, total, dataset_index, sample_index);
    case SimdLevel::avx2:
      return simd_avx2::draw<Exhaustive>(a, total, dataset_index, sample_index);
    case SimdLevel::baseline:
      break;
  }
#endif
  simd_baseline::draw<Exhaustive>(a, total, dataset_index, sample_index);
}

}  // namespace

void blending_indices(const double* weights, int64_t n, int64_t size, int16_t* dataset_index,
                      int64_t* sample_index) {
  Datasets a;
  a.weight.assign(weights, weights + n);
  a.count.assign(static_cast<size_t>(n), 0.0);
  a.id.resize(static_cast<size_t>(n));
  for (int64_t d = 0; d < n; ++d) a.id[static_cast<size_t>(d)] = static_cast<int16_t>(d);
  dispatch<false>(a, size, dataset_index, sample_index);
}

void exhaustive_blending_indices(const int64_t* sizes, int64_t n, int16_t* dataset_index,
                                 int64_t* sample_index) {
  int64_t total = 0;
  for (int64_t d = 0; d < n; ++d) total += sizes[d];
  if (total == 0) return;
  Datasets a;
  for (int64_t d = 0; d < n; ++d) {
    if (sizes[d] == 0) continue;  // gives no sample: never a candidate
    // Megatron's weight: the size over the total, both as doubles
    a.weight.push_back(static_cast<double>(sizes[d]) / static_cast<double>(total));
    a.count.push_back(0.0);
    a.id.push_back(static_cast<int16_t>(d));
    a.left.push_back(sizes[d]);
  }
  dispatch<true>(a, total, dataset_index, sample_index);
}

}  // namespace posembed
