#include "trellis/train/data_factory.hpp"

#include "trellis/core/error.hpp"
#include "trellis/train/sample_source.hpp"
#include "trellis/train/token_source.hpp"

namespace trellis {

namespace {
bool uses_tokens(const TrainConfig& config) { return config.model.type == ModelType::gpt; }
}  // namespace

std::unique_ptr<TrainSource> open_train_source(const TrainConfig& config, const MpiComm& dp) {
  if (config.data.train.empty()) throw ConfigError("config key data.train: no training set given");
  if (uses_tokens(config)) {
    TokenDataset data = TokenDataset::open(config.data.train, dp.get());
    if (config.data.cache_in_memory) data.cache_in_memory();
    return std::make_unique<TokenTrainSource>(std::move(data), config.model.seq_len,
                                              config.train.global_batch, config.train.seed, dp);
  }
  SampleDataset data = SampleDataset::open(config.data.train, dp.get());
  if (config.data.cache_in_memory) data.cache_in_memory();
  return std::make_unique<SampleTrainSource>(
      std::move(data), config.train.global_batch, config.train.seed, config.data.shuffle,
      config.data.remainder == "drop" ? RemainderPolicy::drop : RemainderPolicy::partial, dp);
}

std::unique_ptr<EvalSource> open_eval_source(const TrainConfig& config, const std::string& spec,
                                             const MpiComm& dp, std::int64_t max_batch) {
  if (uses_tokens(config)) {
    TokenDataset data = TokenDataset::open(spec, dp.get());
    if (config.data.cache_in_memory) data.cache_in_memory();
    return std::make_unique<TokenEvalSource>(std::move(data), config.model.seq_len, dp, max_batch,
                                             config.train.eval_max_samples);
  }
  SampleDataset data = SampleDataset::open(spec, dp.get());
  if (config.data.cache_in_memory) data.cache_in_memory();
  return std::make_unique<SampleEvalSource>(std::move(data), dp, max_batch,
                                            config.train.eval_max_samples);
}

}  // namespace trellis
