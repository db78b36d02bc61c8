// Which token windows each data-parallel rank reads: random windows for training, a fixed
// tiling of the stream for evaluation.
//
// A language-model example is a window of seq_len + 1 consecutive tokens: the inputs are its
// first seq_len tokens, the targets its last seq_len (each input's next token).
//
// TokenWindowSampler (training). Position p of global batch `step` starts at
//   random_below(tokens - seq_len, seed, stream_mix(stream_from_name("token-windows"), step), p)
// so starts lie in [0, tokens - seq_len - 1] and every window ends inside the stream. It is a
// pure function of (seed, step, p): every rank computes the same global batch without
// communicating, for any number of ranks, and a resumed run recomputes it from the step.
// There are no epochs: windows are drawn with replacement and may overlap (the usual
// practice for GPT-style training on a token stream).
//
// TokenEvalWindows (validation loss, bits per byte). Window k starts at k * seq_len, for
// k in [0, K), K = floor((tokens - 1) / seq_len): consecutive windows share one token (the
// last target of one is the first input of the next), so the targets tile positions
// [1, K * seq_len] and every one is scored exactly once. The last (tokens - 1) mod seq_len
// tokens (fewer than seq_len) are not scored. Windows are cut into global batches of B in
// order; the last batch may be partial.
//
// In both, rank r of dp ranks gets the contiguous block [floor(r*b/dp), floor((r+1)*b/dp))
// of a global batch of b windows (as DistributedSampler), so the global batch, and therefore
// the gradient or the loss sum, is the same for any dp. A block may be empty (b < dp): that
// rank must still take part in the step's collectives.
#pragma once

#include <cstdint>
#include <vector>

namespace trellis {

class TokenWindowSampler {
 public:
  // Throws ConfigError for seq_len < 1, global_batch < 1, or tokens < seq_len + 1 (no window
  // fits in the stream).
  TokenWindowSampler(std::int64_t tokens, int seq_len, std::int64_t global_batch,
                     std::uint64_t seed);

  std::int64_t tokens() const { return tokens_; }
  int seq_len() const { return seq_len_; }
  int window() const { return seq_len_ + 1; }  // tokens read per example
  std::int64_t global_batch() const { return batch_; }

  // The window start of position p in [0, global_batch) of global batch `step` (>= 0).
  std::int64_t start(std::int64_t step, std::int64_t position) const;

  // out [global_batch]: the starts of every position of global batch `step`.
  void global_starts(std::int64_t step, std::vector<std::int64_t>& out) const;

  // out: rank dp_rank's block of global batch `step`, in position order. Returns the
  // block's first position (a layout-independent id of each example with the step, e.g.
  // for dropout masks). Reuses out's storage.
  std::int64_t local_starts(std::int64_t step, int dp_rank, int dp_size,
                            std::vector<std::int64_t>& out) const;

 private:
  std::int64_t tokens_;
  int seq_len_;
  std::int64_t batch_;
  std::uint64_t seed_;
  std::uint64_t stream_;  // stream_from_name("token-windows")
};

class TokenEvalWindows {
 public:
  // Throws ConfigError for seq_len < 1, global_batch < 1, or tokens < seq_len + 1.
  TokenEvalWindows(std::int64_t tokens, int seq_len, std::int64_t global_batch);

  int seq_len() const { return seq_len_; }
  int window() const { return seq_len_ + 1; }
  std::int64_t window_count() const { return windows_; }              // K
  std::int64_t scored_tokens() const { return windows_ * seq_len_; }  // targets over all K
  std::int64_t steps() const { return (windows_ + batch_ - 1) / batch_; }
  std::int64_t batch_size(std::int64_t step) const;  // B, or fewer for the last step

  // out [batch_size(step)]: starts of global batch `step` (in [0, steps())), in order.
  void global_starts(std::int64_t step, std::vector<std::int64_t>& out) const;

  // out: rank dp_rank's block of global batch `step`; returns the block's first position.
  std::int64_t local_starts(std::int64_t step, int dp_rank, int dp_size,
                            std::vector<std::int64_t>& out) const;

 private:
  int seq_len_;
  std::int64_t batch_;
  std::int64_t windows_;
};

}  // namespace trellis
