#include "trellis/train/input/data_factory.hpp"

#include "trellis/core/error.hpp"
#include "trellis/train/input/prefetch_source.hpp"
#include "trellis/train/input/sample_source.hpp"
#include "trellis/train/input/token_source.hpp"
#include "trellis/train/model/model_registry.hpp"

namespace trellis {

namespace {
bool uses_tokens(const TrainConfig& config) {
  return model_registration(config.model.type).data == DataKind::tokens;
}
}  // namespace

std::unique_ptr<TrainSource> open_train_source(const TrainConfig& config, const MpiComm& dp) {
  if (config.data.train.empty()) throw ConfigError("config key data.train: no training set given");
  const AugmentSpec augment = parse_augment(config.data.augment, config.data.augment_pad,
                                            config.data.augment_scale, config.data.augment_degrees);
  // A loader thread must not call MPI (MPI_THREAD_FUNNELED): read with the POSIX driver.
  Hdf5Tuning tuning;
  tuning.posix_reads = config.data.prefetch > 0;
  if (uses_tokens(config)) {
    if (augment.any())
      throw ConfigError("config key data.augment = " + config.data.augment +
                        ": augmentation is for image samples, not gpt's token streams");
    TokenDataset data = TokenDataset::open(config.data.train, dp.get(), tuning);
    if (config.data.cache_in_memory) data.cache_in_memory();
    return std::make_unique<TokenTrainSource>(std::move(data), config.model.seq_len,
                                              config.train.global_batch, config.train.seed, dp);
  }
  SampleDataset data = SampleDataset::open(config.data.train, dp.get(), tuning);
  if (config.data.cache_in_memory) data.cache_in_memory();
  return std::make_unique<SampleTrainSource>(
      std::move(data), config.train.global_batch, config.train.seed, config.data.shuffle,
      config.data.remainder == "drop" ? RemainderPolicy::drop : RemainderPolicy::partial, dp,
      augment);
}

std::unique_ptr<TrainSource> with_prefetch(std::unique_ptr<TrainSource> source,
                                           const TrainConfig& config, std::int64_t local_capacity,
                                           std::int64_t end_step) {
  if (config.data.prefetch <= 0) return source;
  return std::make_unique<PrefetchingTrainSource>(std::move(source), config.data.prefetch,
                                                  local_capacity, end_step);
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
