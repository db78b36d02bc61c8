// Train and evaluation sources over labelled samples (SampleDataset, "trellis.samples").
#pragma once

#include "trellis/comm/mpi_comm.hpp"
#include "trellis/data/augment.hpp"
#include "trellis/data/sample_dataset.hpp"
#include "trellis/data/sampler.hpp"
#include "trellis/train/input/data_source.hpp"

#include <memory>
#include <optional>

namespace trellis {

DataShape sample_data_shape(const SampleDataset& data);

class SampleTrainSource : public TrainSource {
 public:
  // augment: applied to every loaded training image (throws ConfigError when it asks for
  // crop/flip and the samples are not [C, H, W]).
  SampleTrainSource(SampleDataset data, std::int64_t global_batch, std::uint64_t seed, bool shuffle,
                    RemainderPolicy remainder, const MpiComm& dp,
                    const AugmentSpec& augment = AugmentSpec{});
  DataShape shape() const override { return sample_data_shape(data_); }
  std::int64_t steps_per_epoch() const override { return sampler_.steps_per_epoch(); }
  LocalPart load(std::int64_t epoch, std::int64_t step_in_epoch, std::int64_t global_step,
                 BatchBuffers& buffers) override;
  std::string describe() const override;

 private:
  SampleDataset data_;
  DistributedSampler sampler_;
  const MpiComm& dp_;
  LocalBatch local_;                         // reused every step
  std::optional<ImageAugmenter> augmenter_;  // empty: no augmentation
};

// The first N samples (N = the set, or max_samples when smaller and > 0); rank r of dp
// evaluates the contiguous block [floor(r*N/dp), floor((r+1)*N/dp)).
class SampleEvalSource : public EvalSource {
 public:
  SampleEvalSource(SampleDataset data, const MpiComm& dp, std::int64_t max_batch,
                   std::int64_t max_samples);
  DataShape shape() const override { return sample_data_shape(data_); }
  std::int64_t total_samples() const override { return total_; }
  std::int64_t local_samples() const override { return end_ - begin_; }
  void load(std::int64_t offset, std::int64_t count, BatchBuffers& buffers) override;
  std::string describe() const override;

 private:
  SampleDataset data_;
  std::int64_t total_, begin_, end_;
  std::vector<std::int64_t> indices_;  // reused by every load
};

}  // namespace trellis
