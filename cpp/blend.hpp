// blend: the blending indices of Megatron-LM's BlendedDataset, equal element
// for element to megatron-core's helpers.build_blending_indices and
// helpers.build_exhaustive_blending_indices.
//
// Both draw samples one at a time: sample i goes to the dataset d whose error
// fl(fl(w[d] * x) - double(count[d])), with x = max(double(i), 1.0), is the
// largest (the lowest d among equal largest), and records that dataset and
// its count before the draw, which then grows by one. Megatron's loop looks at
// every dataset for every sample. Here each block of L samples first rules
// out, in one SIMD pass, every dataset that provably cannot be drawn in it;
// the samples of the block look only at the few that are left (see
// blend.simd.inc for the bound and why it is exact).
//
// Every error is computed as Megatron computes it: a double multiply, rounded,
// then a double subtract, rounded (no fused multiply-add: this file is built
// with -ffp-contract=off and the SIMD copies use separate multiply and
// subtract instructions). Every SIMD level gives the same result; the draw is
// sequential, so the thread count plays no part.
#pragma once

#include <cstdint>

namespace posembed {

// The most datasets a blend may hold: dataset ids are int16.
constexpr int64_t kMaxBlendDatasets = 32766;

// build_blending_indices: `size` samples drawn from n datasets (1 <= n <=
// kMaxBlendDatasets) by weights[0..n), each finite and > 0, used as given.
// Writes dataset_index[0..size) and sample_index[0..size).
void blending_indices(const double* weights, int64_t n, int64_t size, int16_t* dataset_index,
                      int64_t* sample_index);

// build_exhaustive_blending_indices: every sample of n datasets whose sizes
// are sizes[0..n) (each >= 0, sum(sizes) < 2^53), drawn by the weights
// sizes[d] / double(sum(sizes)) until each dataset has given all of its
// samples; a spent dataset is drawn no more. A dataset of size 0 gives no
// sample (Megatron's helper cannot take one: it draws from it and runs past
// the end of its arrays). Writes sum(sizes) entries of each output.
void exhaustive_blending_indices(const int64_t* sizes, int64_t n, int16_t* dataset_index,
                                 int64_t* sample_index);

}  // namespace posembed
