#include "random.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#include "simd.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace posembed {

namespace {

constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;
constexpr uint64_t kWeylLo = 0x9E3779B97F4A7C15ull;
constexpr uint64_t kWeylHi = 0xBB67AE8584CAA73Bull;

inline uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// ---------------------------------------------------------------- software AES

inline uint8_t xtime(uint8_t a) {
  return static_cast<uint8_t>((a << 1) ^ ((a & 0x80) ? 0x1b : 0x00));
}

uint8_t gf_mul(uint8_t a, uint8_t b) {
  uint8_t p = 0;
  for (int i = 0; i < 8; ++i) {
    if (b & 1) p ^= a;
    a = xtime(a);
    b = static_cast<uint8_t>(b >> 1);
  }
  return p;
}

// The AES S-box from its definition: the inverse in GF(2^8), then the affine map.
std::array<uint8_t, 256> make_sbox() {
  std::array<uint8_t, 256> box{};
  for (int x = 0; x < 256; ++x) {
    uint8_t inv = 0;
    if (x != 0) {  // x^254 = x^-1
      uint8_t r = 1;
      auto base = static_cast<uint8_t>(x);
      for (int e = 254; e > 0; e >>= 1) {
        if (e & 1) r = gf_mul(r, base);
        base = gf_mul(base, base);
      }
      inv = r;
    }
    auto rotl = [](uint8_t v, int s) {
      return static_cast<uint8_t>((v << s) | (v >> (8 - s)));
    };
    box[static_cast<size_t>(x)] = static_cast<uint8_t>(inv ^ rotl(inv, 1) ^ rotl(inv, 2) ^
                                                       rotl(inv, 3) ^ rotl(inv, 4) ^ 0x63);
  }
  return box;
}

const std::array<uint8_t, 256> kSbox = make_sbox();
constexpr int kShiftRows[16] = {0, 5, 10, 15, 4, 9, 14, 3, 8, 13, 2, 7, 12, 1, 6, 11};

// One x86 AESENC (last: AESENCLAST) round on 16 state bytes, byte 0 lowest.
void aes_round(uint8_t* s, const uint8_t* key, bool last) {
  uint8_t t[16];
  for (int i = 0; i < 16; ++i) t[i] = kSbox[s[kShiftRows[i]]];
  if (!last) {
    for (int c = 0; c < 4; ++c) {
      uint8_t* a = t + 4 * c;
      const uint8_t x = static_cast<uint8_t>(a[0] ^ a[1] ^ a[2] ^ a[3]);
      const uint8_t a0 = a[0];
      a[0] = static_cast<uint8_t>(a[0] ^ x ^ xtime(static_cast<uint8_t>(a[0] ^ a[1])));
      a[1] = static_cast<uint8_t>(a[1] ^ x ^ xtime(static_cast<uint8_t>(a[1] ^ a[2])));
      a[2] = static_cast<uint8_t>(a[2] ^ x ^ xtime(static_cast<uint8_t>(a[2] ^ a[3])));
      a[3] = static_cast<uint8_t>(a[3] ^ x ^ xtime(static_cast<uint8_t>(a[3] ^ a0)));
    }
  }
  for (int i = 0; i < 16; ++i) s[i] = static_cast<uint8_t>(t[i] ^ key[i]);
}

void put_le64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint32_t get_le32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

void blocks_software(const RandomKey& k, uint64_t first, int64_t n, uint32_t* out) {
  uint8_t keys[6][16];
  for (int i = 0; i < 6; ++i) {
    put_le64(keys[i], k.lo[i]);
    put_le64(keys[i] + 8, k.hi[i]);
  }
  for (int64_t m = 0; m < n; ++m) {
    uint8_t s[16];
    put_le64(s, first + static_cast<uint64_t>(m));
    put_le64(s + 8, 0);
    for (int i = 0; i < 16; ++i) s[i] = static_cast<uint8_t>(s[i] ^ keys[0][i]);
    for (int r = 1; r <= 5; ++r) aes_round(s, keys[r], r == 5);
    for (int w = 0; w < 4; ++w) out[4 * m + w] = get_le32(s + 4 * w);
  }
}

// ---------------------------------------------------------------- AES instructions

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("aes,sse4.1"))) void blocks_aesni(const RandomKey& k, uint64_t first,
                                                        int64_t n, uint32_t* out) {
  __m128i key[6];
  for (int i = 0; i < 6; ++i) {
    key[i] = _mm_set_epi64x(static_cast<long long>(k.hi[i]), static_cast<long long>(k.lo[i]));
  }
  int64_t m = 0;
  // The counter block (j, 0), stepped by vector adds: building each block
  // from scalars cost more than its AES rounds. 64-bit lanes wrap exactly as
  // the scalar counter.
  __m128i ctr = _mm_set_epi64x(0, static_cast<long long>(first));
  const __m128i one = _mm_set_epi64x(0, 1);
  for (; m + 4 <= n; m += 4) {  // four independent blocks hide the round latency
    __m128i v[4];
    for (int b = 0; b < 4; ++b) {
      v[b] = _mm_xor_si128(ctr, key[0]);
      ctr = _mm_add_epi64(ctr, one);
    }
    for (int r = 1; r < 5; ++r) {
      for (int b = 0; b < 4; ++b) v[b] = _mm_aesenc_si128(v[b], key[r]);
    }
    for (int b = 0; b < 4; ++b) {
      v[b] = _mm_aesenclast_si128(v[b], key[5]);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 4 * (m + b)), v[b]);
    }
  }
  for (; m < n; ++m) {
    const auto j = static_cast<long long>(first + static_cast<uint64_t>(m));
    __m128i v = _mm_xor_si128(_mm_set_epi64x(0, j), key[0]);
    for (int r = 1; r < 5; ++r) v = _mm_aesenc_si128(v, key[r]);
    v = _mm_aesenclast_si128(v, key[5]);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 4 * m), v);
  }
}

__attribute__((target("vaes,avx2,aes"))) void blocks_vaes(const RandomKey& k, uint64_t first,
                                                          int64_t n, uint32_t* out) {
  __m256i key[6];
  for (int i = 0; i < 6; ++i) {
    const auto lo = static_cast<long long>(k.lo[i]);
    const auto hi = static_cast<long long>(k.hi[i]);
    key[i] = _mm256_set_epi64x(hi, lo, hi, lo);
  }
  int64_t m = 0;
  // Counter blocks (j, 0) and (j + 1, 0) in the two lanes, stepped by vector
  // adds (see blocks_aesni); 64-bit lanes wrap exactly as the scalar counter.
  const auto j0 = static_cast<long long>(first);
  __m256i ctr = _mm256_set_epi64x(0, j0 + 1, 0, j0);
  const __m256i two = _mm256_set_epi64x(0, 2, 0, 2);
  for (; m + 8 <= n; m += 8) {  // four vectors of two blocks each
    __m256i v[4];
    for (int b = 0; b < 4; ++b) {
      v[b] = _mm256_xor_si256(ctr, key[0]);
      ctr = _mm256_add_epi64(ctr, two);
    }
    for (int r = 1; r < 5; ++r) {
      for (int b = 0; b < 4; ++b) v[b] = _mm256_aesenc_epi128(v[b], key[r]);
    }
    for (int b = 0; b < 4; ++b) {
      v[b] = _mm256_aesenclast_epi128(v[b], key[5]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 4 * (m + 2 * b)), v[b]);
    }
  }
  if (m < n) blocks_aesni(k, first + static_cast<uint64_t>(m), n - m, out + 4 * m);
}
#endif

using BlocksFn = void (*)(const RandomKey&, uint64_t, int64_t, uint32_t*);

struct Impl {
  BlocksFn fn;
  const char* name;
};

// The AES instructions are not part of the x86-64 baseline: at that level
// (POSEMBED_SIMD=baseline) the software rounds run; tests compare the bits.
Impl pick() {
#if defined(__x86_64__) && defined(__GNUC__)
  const bool wide = simd_level() != SimdLevel::baseline;
  __builtin_cpu_init();
  if (wide && __builtin_cpu_supports("vaes") && __builtin_cpu_supports("avx2") &&
      __builtin_cpu_supports("aes")) {
    return {blocks_vaes, "vaes"};
  }
  if (wide && __builtin_cpu_supports("aes") && __builtin_cpu_supports("sse4.1")) {
    return {blocks_aesni, "aesni"};
  }
#endif
  return {blocks_software, "software"};
}

const Impl g_impl = pick();

constexpr int64_t kBlocks = 256;  // blocks per call of the block function

}  // namespace

RandomKey random_key(uint64_t seed) {
  RandomKey k{};
  const uint64_t lo = mix(seed);
  const uint64_t hi = mix(seed + kGamma);
  for (uint64_t i = 0; i < 6; ++i) {
    k.lo[i] = lo + i * kWeylLo;
    k.hi[i] = hi + i * kWeylHi;
  }
  return k;
}

void random_bits(const RandomKey& key, int64_t first, int64_t n, uint32_t* u) {
  uint32_t tmp[4];
  int64_t e = first;
  const int64_t end = first + n;
  if (e < end && (e & 3)) {  // a head inside its block
    g_impl.fn(key, static_cast<uint64_t>(e >> 2), 1, tmp);
    const int64_t take = std::min<int64_t>(4 - (e & 3), end - e);
    std::memcpy(u, tmp + (e & 3), static_cast<size_t>(take) * sizeof(uint32_t));
    u += take;
    e += take;
  }
  while (end - e >= 4) {
    const int64_t blocks = std::min<int64_t>(kBlocks, (end - e) / 4);
    g_impl.fn(key, static_cast<uint64_t>(e >> 2), blocks, u);
    u += 4 * blocks;
    e += 4 * blocks;
  }
  if (e < end) {
    g_impl.fn(key, static_cast<uint64_t>(e >> 2), 1, tmp);
    std::memcpy(u, tmp, static_cast<size_t>(end - e) * sizeof(uint32_t));
  }
}

std::string random_bits_impl() { return g_impl.name; }

}  // namespace posembed
