#include "trellis/train/data_factory.hpp"

#include "trellis/core/error.hpp"
#include "trellis/train/sample_source.hpp"

namespace trellis {

std::unique_ptr<TrainSource> open_train_source(const TrainConfig& config, const MpiComm& dp) {
  if (config.data.train.empty()) throw ConfigError("config key data.train: no training set given");
  SampleDataset data = SampleDataset::open(config.data.train, dp.get());
  if (config.data.cache_in_memory) data.cache_in_memory();
  return std::make_unique<SampleTrainSource>(
      std::move(data), config.train.global_batch, config.train.seed, config.data.shuffle,
      config.data.remainder == "drop" ? RemainderPolicy::drop : RemainderPolicy::partial, dp);
}

std::unique_ptr<EvalSource> open_eval_source(const TrainConfig& config, const std::string& spec,
                                             const MpiComm& dp, std::int64_t max_batch) {
  SampleDataset data = SampleDataset::open(spec, dp.get());
  if (config.data.cache_in_memory) data.cache_in_memory();
  return std::make_unique<SampleEvalSource>(std::move(data), dp, max_batch, config.train.eval_max_samples);
}

}  // namespace trellis
