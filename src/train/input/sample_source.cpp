#include "trellis/train/input/sample_source.hpp"

#include <algorithm>
#include <numeric>

namespace trellis {

DataShape sample_data_shape(const SampleDataset& data) {
  DataShape shape;
  shape.sample_shape = data.sample_shape();
  shape.feature_numel = data.sample_numel();
  shape.classes = data.num_classes();
  return shape;
}

namespace {
std::string describe_samples(const SampleDataset& data) {
  return std::to_string(data.size()) + " samples of " + shape_string(data.sample_shape()) + ", " +
         std::to_string(data.num_classes()) + " classes" +
         (data.cached() ? " (cached in memory)" : "");
}
}  // namespace

SampleTrainSource::SampleTrainSource(SampleDataset data, std::int64_t global_batch,
                                     std::uint64_t seed, bool shuffle, RemainderPolicy remainder,
                                     const MpiComm& dp, const AugmentSpec& augment)
    : data_(std::move(data)),
      sampler_(data_.size(), global_batch, seed, shuffle, remainder),
      dp_(dp) {
  local_.indices.reserve(static_cast<std::size_t>(global_batch / dp.size() + 1));
  if (augment.any()) {
    // Padding is raw 0, i.e. -mean/std after normalisation (per channel).
    const Normalization& norm = data_.normalization();
    const std::size_t channels = std::max(norm.mean.size(), norm.std.size());
    auto at = [](const std::vector<float>& v, std::size_t c) { return v[v.size() == 1 ? 0 : c]; };
    std::vector<float> fill(channels);
    for (std::size_t c = 0; c < channels; ++c) fill[c] = -at(norm.mean, c) / at(norm.std, c);
    augmenter_.emplace(augment, seed, data_.sample_shape(), std::move(fill));
  }
}

LocalPart SampleTrainSource::load(std::int64_t epoch, std::int64_t step_in_epoch,
                                  std::int64_t /*global_step*/, BatchBuffers& buffers) {
  sampler_.local_indices(epoch, step_in_epoch, dp_.rank(), dp_.size(), local_);
  LocalPart part;
  part.samples = static_cast<std::int64_t>(local_.indices.size());
  part.first_position = local_.first_position;
  part.global_samples = local_.global_size;
  // Called with an empty block too: with collective transfer every rank must join the read.
  data_.read(local_.indices, buffers.host_features.data(), buffers.host_targets.data());
  if (augmenter_)
    augmenter_->apply(epoch, local_.indices.data(), part.samples, buffers.host_features.data());
  return part;
}

std::string SampleTrainSource::describe() const { return describe_samples(data_); }

SampleEvalSource::SampleEvalSource(SampleDataset data, const MpiComm& dp, std::int64_t max_batch,
                                   std::int64_t max_samples)
    : data_(std::move(data)),
      total_(max_samples > 0 ? std::min(max_samples, data_.size()) : data_.size()),
      begin_(total_ * dp.rank() / dp.size()),
      end_(total_ * (dp.rank() + 1) / dp.size()) {
  indices_.reserve(static_cast<std::size_t>(max_batch));
}

void SampleEvalSource::load(std::int64_t offset, std::int64_t count, BatchBuffers& buffers) {
  indices_.resize(static_cast<std::size_t>(count));
  std::iota(indices_.begin(), indices_.end(), begin_ + offset);
  data_.read(indices_, buffers.host_features.data(), buffers.host_targets.data());
}

std::string SampleEvalSource::describe() const { return describe_samples(data_); }

}  // namespace trellis
