// Train and evaluation sources over token streams (TokenDataset, "trellis.tokens").
//
// Training: each global batch is global_batch windows of seq_len + 1 tokens whose starts are a
// pure function of (seed, step, position) (TokenWindowSampler); rank r reads its contiguous
// block of positions. Inputs are the first seq_len tokens of a window, targets the last
// seq_len. An "epoch" is tokens / (global_batch x seq_len) steps, for scheduling and logs only.
// Evaluation: the stream cut into K = (tokens - 1) / seq_len consecutive windows (every
// token scored once), rank r taking windows [floor(r*K/dp), floor((r+1)*K/dp)).
#pragma once

#include "trellis/comm/mpi_comm.hpp"
#include "trellis/data/token_dataset.hpp"
#include "trellis/data/token_sampler.hpp"
#include "trellis/train/input/data_source.hpp"

#include <vector>

namespace trellis {

class TokenTrainSource : public TrainSource {
 public:
  TokenTrainSource(TokenDataset data, int seq_len, std::int64_t global_batch, std::uint64_t seed,
                   const MpiComm& dp);
  DataShape shape() const override;
  std::int64_t steps_per_epoch() const override;
  LocalPart load(std::int64_t epoch, std::int64_t step_in_epoch, std::int64_t global_step,
                 BatchBuffers& buffers) override;
  std::string describe() const override;

 private:
  TokenDataset data_;
  TokenWindowSampler sampler_;
  const MpiComm& dp_;
  std::vector<std::int64_t> starts_;   // this rank's window starts, reused
  std::vector<std::int32_t> windows_;  // [local windows, seq_len + 1], reused
};

class TokenEvalSource : public EvalSource {
 public:
  // max_samples > 0 keeps only the first max_samples windows.
  TokenEvalSource(TokenDataset data, int seq_len, const MpiComm& dp, std::int64_t max_batch,
                  std::int64_t max_samples);
  DataShape shape() const override;
  std::int64_t total_samples() const override { return total_; }
  std::int64_t local_samples() const override { return end_ - begin_; }
  void load(std::int64_t offset, std::int64_t count, BatchBuffers& buffers) override;
  std::string describe() const override;

 private:
  TokenDataset data_;
  int seq_len_;
  std::int64_t total_, begin_, end_;
  std::vector<std::int64_t> starts_;
  std::vector<std::int32_t> windows_;
};

// Splits windows [count, seq_len + 1] into inputs and next-token targets, each [count, seq_len].
void split_windows(const std::int32_t* windows, std::int64_t count, int seq_len,
                   std::int32_t* inputs, std::int32_t* targets);

}  // namespace trellis
