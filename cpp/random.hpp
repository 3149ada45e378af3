// Counter-based random bits for dropout masks: AES rounds of a counter (the
// ARS construction of Salmon et al., "Parallel random numbers: as easy as
// 1, 2, 3", SC 2011), so element e's bits depend on (seed, e) only.
//
//   key k0 = (mix(seed), mix(seed + G)) as the low and high 64-bit halves of
//   a 128-bit value, round keys k_i = k0 + i * W (each half modulo 2^64),
//   W = (0x9E3779B97F4A7C15, 0xBB67AE8584CAA73B), mix = SplitMix64's
//   finaliser, G = 0x9E3779B97F4A7C15;
//   block j = AESENCLAST(AESENC^4(j ^ k0, k1..k4), k5), with j as a 128-bit
//   little-endian counter and AESENC / AESENCLAST the x86 AES round
//   instructions' functions;
//   element e's 32 bits = 32-bit little-endian word e % 4 of block e / 4.
//
// The bits are the same on every machine: the AES instructions (AES-NI, or
// VAES two blocks at a time) where the CPU has them, a table-free software
// AES round elsewhere and under POSEMBED_SIMD=baseline.
#pragma once

#include <cstdint>
#include <string>

namespace posembed {

struct RandomKey {
  uint64_t lo[6];
  uint64_t hi[6];
};

RandomKey random_key(uint64_t seed);

// u[k] = the 32 random bits of element first + k, for k in [0, n).
void random_bits(const RandomKey& key, int64_t first, int64_t n, uint32_t* u);

// "vaes", "aesni" or "software": the implementation random_bits uses.
std::string random_bits_impl();

}  // namespace posembed
