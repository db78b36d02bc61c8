#include "trellis/data/token_sampler.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/rng.hpp"
#include "trellis/data/sampler.hpp"

#include <algorithm>
#include <string>
#include <utility>

namespace trellis {

namespace {

void check_shape(const char* who, std::int64_t tokens, int seq_len, std::int64_t global_batch) {
  const std::string prefix = std::string(who) + ": ";
  if (seq_len < 1) throw ConfigError(prefix + "sequence length must be >= 1");
  if (global_batch < 1) throw ConfigError(prefix + "global batch size must be >= 1");
  if (tokens < static_cast<std::int64_t>(seq_len) + 1) {
    throw ConfigError(prefix + "the token stream has " + std::to_string(tokens) +
                      " tokens, fewer than one window of seq_len + 1 = " +
                      std::to_string(static_cast<std::int64_t>(seq_len) + 1));
  }
}

// Rank r's block [floor(r*b/dp), floor((r+1)*b/dp)) of a global batch of b positions.
std::pair<std::int64_t, std::int64_t> block(std::int64_t b, int dp_rank, int dp_size) {
  TRELLIS_REQUIRE(dp_size >= 1 && dp_rank >= 0 && dp_rank < dp_size,
                  "dp rank " + std::to_string(dp_rank) + " of " + std::to_string(dp_size));
  return {dp_rank * b / dp_size, (dp_rank + 1) * b / dp_size};
}

}  // namespace

TokenWindowSampler::TokenWindowSampler(std::int64_t tokens, int seq_len, std::int64_t global_batch,
                                       std::uint64_t seed)
    : tokens_(tokens),
      seq_len_(seq_len),
      batch_(global_batch),
      seed_(seed),
      stream_(stream_from_name("token-windows")) {
  check_shape("token window sampler", tokens, seq_len, global_batch);
}

std::int64_t TokenWindowSampler::start(std::int64_t step, std::int64_t position) const {
  TRELLIS_REQUIRE(step >= 0 && position >= 0 && position < batch_,
                  "step " + std::to_string(step) + ", position " + std::to_string(position));
  return static_cast<std::int64_t>(random_below(
      static_cast<std::uint64_t>(tokens_ - seq_len_), seed_,
      stream_mix(stream_, static_cast<std::uint64_t>(step)), static_cast<std::uint64_t>(position)));
}

void TokenWindowSampler::global_starts(std::int64_t step, std::vector<std::int64_t>& out) const {
  local_starts(step, 0, 1, out);
}

std::int64_t TokenWindowSampler::local_starts(std::int64_t step, int dp_rank, int dp_size,
                                              std::vector<std::int64_t>& out) const {
  const auto [first, last] = block(batch_, dp_rank, dp_size);
  out.resize(static_cast<std::size_t>(last - first));
  for (std::int64_t p = first; p < last; ++p)
    out[static_cast<std::size_t>(p - first)] = start(step, p);
  return first;
}

TokenEvalWindows::TokenEvalWindows(std::int64_t tokens, int seq_len, std::int64_t global_batch)
    : seq_len_(seq_len), batch_(global_batch), windows_(0) {
  check_shape("evaluation windows", tokens, seq_len, global_batch);
  windows_ = (tokens - 1) / seq_len;
}

std::int64_t TokenEvalWindows::batch_size(std::int64_t step) const {
  TRELLIS_REQUIRE(step >= 0 && step < steps(),
                  "evaluation step " + std::to_string(step) + " of " + std::to_string(steps()));
  return std::min(batch_, windows_ - step * batch_);
}

void TokenEvalWindows::global_starts(std::int64_t step, std::vector<std::int64_t>& out) const {
  local_starts(step, 0, 1, out);
}

std::int64_t TokenEvalWindows::local_starts(std::int64_t step, int dp_rank, int dp_size,
                                            std::vector<std::int64_t>& out) const {
  const auto [first, last] = block(batch_size(step), dp_rank, dp_size);
  out.resize(static_cast<std::size_t>(last - first));
  for (std::int64_t p = first; p < last; ++p) {
    out[static_cast<std::size_t>(p - first)] = (step * batch_ + p) * seq_len_;
  }
  return first;
}

}  // namespace trellis
