#include "embed.hpp"

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "copy.hpp"
#include "parallel.hpp"
#include "rowops.hpp"
#include "runtime.hpp"

namespace posembed {

namespace {

// Elements per block of the mask and dropout loops.
constexpr int64_t kBlock = 1024;
// Pieces a row's random bits are drawn in, the next row's reads asked for between them.
constexpr int64_t kDrawPieces = 8;

template <class S>
void embed_t(const RowsView& tokens, const int64_t* ids, int64_t rows, const RowsView& pos,
             const PositionRows& positions, const DropoutSpec& drop, S* out) {
  using C = typename Compute<S>::type;
  const int64_t cols = tokens.cols;
  const auto scale = static_cast<C>(drop.scale);
  const int64_t last_token = tokens.rows - 1;
  const int64_t last_pos = pos.rows - 1;
  const auto bytes = rows * cols * static_cast<int64_t>(sizeof(S));
  // Large float32 outputs are streamed, fresh or not (see runtime.hpp).
  const bool stream = std::is_same_v<S, float> && use_streaming_random_reads(bytes);
  parallel_for(rows, threads_for_bytes(bytes), [&](int64_t begin, int64_t end, int) {
    std::vector<uint32_t> u(static_cast<size_t>(drop.active ? cols : 0));
    for (int64_t r = begin; r < end; ++r) {
      const int64_t id = std::clamp<int64_t>(read_once(ids + r), 0, last_token);
      const int64_t p = std::clamp<int64_t>(positions.of(r), 0, last_pos);
      const auto* a = reinterpret_cast<const S*>(tokens.data + id * tokens.row_stride);
      const auto* b = reinterpret_cast<const S*>(pos.data + p * pos.row_stride);
      S* dst = out + r * cols;
      // The next token row is a random read from memory: ask for it now, so
      // that its latency hides behind this row's work. With dropout the
      // requests are spread over the drawing of this row's random bits: asked
      // all at once they fill the core's miss buffers and stall it, and the
      // drawing waits behind them.
      const char* next_row = nullptr;
      if (r + 1 < end) {
        const int64_t next = std::clamp<int64_t>(read_once(ids + r + 1), 0, last_token);
        next_row = tokens.data + next * tokens.row_stride;
      }
      const auto row_bytes = cols * static_cast<int64_t>(sizeof(S));
      if (drop.active) {
        const int64_t first = (drop.first_row + r) * cols;
        const int64_t lines = next_row ? (row_bytes + 63) / 64 : 0;
        for (int64_t k = 0; k < kDrawPieces; ++k) {
          const int64_t from = cols * k / kDrawPieces;
          const int64_t to = cols * (k + 1) / kDrawPieces;
          for (int64_t l = lines * k / kDrawPieces; l < lines * (k + 1) / kDrawPieces; ++l) {
            __builtin_prefetch(next_row + 64 * l);
          }
          random_bits(drop.key, first + from, to - from, u.data() + from);
        }
      } else if (next_row) {
        for (int64_t k = 0; k < row_bytes; k += 64) __builtin_prefetch(next_row + k);
      }
      if constexpr (std::is_same_v<S, float>) {
        if (stream && drop.active) {
          dropout_add_stream(dst, a, b, u.data(), drop.threshold, scale, cols);
        } else if (stream) {
          blend_stream(dst, a, b, 1.0f, 1.0f, cols);  // 1 * a + 1 * b is exactly a + b
        } else if (drop.active) {
          dropout_add(dst, a, b, u.data(), drop.threshold, scale, cols);
        } else {
          add(dst, a, b, cols);
        }
      } else if (drop.active) {
        dropout_add(dst, a, b, u.data(), drop.threshold, scale, cols);
      } else {
        add(dst, a, b, cols);
      }
    }
    if (stream) stream_fence();
  });
}

}  // namespace

void dropout_mask(const RandomKey& key, uint32_t threshold, int64_t n, bool* mask) {
  parallel_for(n, threads_for_bytes(n), [&](int64_t begin, int64_t end, int) {
    uint32_t u[kBlock];
    for (int64_t b = begin; b < end; b += kBlock) {
      const int64_t len = std::min(kBlock, end - b);
      random_bits(key, b, len, u);
      keep_mask(mask + b, u, threshold, len);
    }
  }, 64);
}

void embed(const RowsView& tokens, const int64_t* ids, int64_t rows, const RowsView& pos,
           const PositionRows& positions, FloatKind kind, const DropoutSpec& dropout, char* out) {
  with_float_kind(kind, [&](auto s) {
    using S = decltype(s);
    embed_t<S>(tokens, ids, rows, pos, positions, dropout, reinterpret_cast<S*>(out));
  });
}

}  // namespace posembed
