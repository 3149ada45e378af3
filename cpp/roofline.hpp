// The memory rooflines every benchmark is measured against: writing or
// copying the kernel's output bytes with all threads, as fast as the machine
// allows. Defined once here so that every kernel's figure means the same.
#pragma once

#include <cstdint>

namespace posembed {

// memset of n bytes split over `threads` threads; `stream` uses
// non-temporal stores instead of the C library's memset.
void roofline_fill(char* dst, int64_t n, unsigned char value, int threads, bool stream);
// memcpy of n bytes split over `threads` threads.
void roofline_copy(char* dst, const char* src, int64_t n, int threads, bool stream);
// The thread-scaling ceiling: n steps of a dependent integer recurrence (no
// memory traffic at all), split into chunks as every kernel's work is. Its
// speed-up from 1 to k threads is the most any kernel can show on this
// machine at that moment. Returns a value that depends on every step.
uint64_t roofline_spin(int64_t n, int threads);
// The compute roofline: n steps of flops_loop (rowops.hpp) split into
// chunks over `threads` threads, as every kernel's work is; n * flops_per_step(fused)
// float operations in all. Returns a value that depends on every step.
double roofline_flops(int64_t n, int threads, bool fused);
// The compute roofline of dropout: the random bits of n elements (as
// random_bits draws them for a mask, at the level in use) split into chunks
// over `threads` threads, each thread's bits drawn into a buffer of its own
// that stays in its L1 cache. Returns the XOR of the first word of every
// 1024 (the same for any thread count).
uint64_t roofline_random_bits(int64_t n, int threads);
// The page cache's roofline of a kernel that reads a file with positional
// reads: n ranges (byte offset, length) of the file `fd` read into dst back
// to back, split over `threads` threads as a kernel's work is, and nothing
// else. Returns 0, an errno, or -1 where the file ended first.
int roofline_pread(int fd, const int64_t* ranges, int64_t n, char* dst, int threads);
// The same ranges copied out of a mapping of the whole file (`map`, map_size
// bytes), the other way to read the page cache. Returns 0, or -1 where a
// range lies outside the mapping.
int roofline_mapped(const uint8_t* map, int64_t map_size, const int64_t* ranges, int64_t n,
                    char* dst, int threads);

}  // namespace posembed
