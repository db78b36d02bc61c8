#include "trellis/train/input/token_source.hpp"

#include <algorithm>

namespace trellis {

namespace {

DataShape token_shape(const TokenDataset& data, int seq_len) {
  DataShape shape;
  shape.classes = data.vocab_size();
  shape.seq_len = seq_len;
  return shape;
}

std::string describe_tokens(const TokenDataset& data) {
  return std::to_string(data.size()) + " tokens (" + data.tokenizer() + ", vocab " +
         std::to_string(data.vocab_size()) + ", split " + data.split() + ")" +
         (data.cached() ? " (cached in memory)" : "");
}

}  // namespace

void split_windows(const std::int32_t* windows, std::int64_t count, int seq_len,
                   std::int32_t* inputs, std::int32_t* targets) {
  for (std::int64_t w = 0; w < count; ++w) {
    const std::int32_t* window = windows + w * (seq_len + 1);
    std::copy(window, window + seq_len, inputs + w * seq_len);
    std::copy(window + 1, window + seq_len + 1, targets + w * seq_len);
  }
}

TokenTrainSource::TokenTrainSource(TokenDataset data, int seq_len, std::int64_t global_batch,
                                   std::uint64_t seed, const MpiComm& dp)
    : data_(std::move(data)), sampler_(data_.size(), seq_len, global_batch, seed), dp_(dp) {
  const auto local = static_cast<std::size_t>(global_batch / dp.size() + 1);
  starts_.reserve(local);
  windows_.resize(local * static_cast<std::size_t>(seq_len + 1));
}

DataShape TokenTrainSource::shape() const { return token_shape(data_, sampler_.seq_len()); }

std::int64_t TokenTrainSource::steps_per_epoch() const {
  return std::max<std::int64_t>(1, data_.size() / (sampler_.global_batch() * sampler_.seq_len()));
}

LocalPart TokenTrainSource::load(std::int64_t /*epoch*/, std::int64_t /*step_in_epoch*/,
                                 std::int64_t global_step, BatchBuffers& buffers) {
  LocalPart part;
  part.first_position = sampler_.local_starts(global_step, dp_.rank(), dp_.size(), starts_);
  part.samples = static_cast<std::int64_t>(starts_.size());
  part.global_samples = sampler_.global_batch();
  // Called with an empty block too: with collective transfer every rank must join the read.
  data_.read_windows(starts_, sampler_.window(), windows_.data());
  split_windows(windows_.data(), part.samples, sampler_.seq_len(), buffers.host_tokens.data(),
                buffers.host_targets.data());
  return part;
}

std::string TokenTrainSource::describe() const { return describe_tokens(data_); }

TokenEvalSource::TokenEvalSource(TokenDataset data, int seq_len, const MpiComm& dp,
                                 std::int64_t max_batch, std::int64_t max_samples)
    : data_(std::move(data)), seq_len_(seq_len) {
  const std::int64_t windows = (data_.size() - 1) / seq_len;
  if (windows < 1)
    throw InputError(data_.shard_path(0) + ": " + std::to_string(data_.size()) +
                     " tokens, fewer than one evaluation window of model.seq_len + 1 = " +
                     std::to_string(seq_len + 1));
  total_ = max_samples > 0 ? std::min(max_samples, windows) : windows;
  begin_ = total_ * dp.rank() / dp.size();
  end_ = total_ * (dp.rank() + 1) / dp.size();
  starts_.reserve(static_cast<std::size_t>(max_batch));
  windows_.resize(static_cast<std::size_t>(max_batch * (seq_len + 1)));
}

DataShape TokenEvalSource::shape() const { return token_shape(data_, seq_len_); }

void TokenEvalSource::load(std::int64_t offset, std::int64_t count, BatchBuffers& buffers) {
  starts_.resize(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i)
    starts_[static_cast<std::size_t>(i)] = (begin_ + offset + i) * seq_len_;
  data_.read_windows(starts_, seq_len_ + 1, windows_.data());
  split_windows(windows_.data(), count, seq_len_, buffers.host_tokens.data(),
                buffers.host_targets.data());
}

std::string TokenEvalSource::describe() const { return describe_tokens(data_); }

}  // namespace trellis
