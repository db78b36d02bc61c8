#include "trellis/train/config/memory_estimate.hpp"

#include "trellis/core/error.hpp"
#include "trellis/train/config/config_table.hpp"
#include "trellis/train/model/model_registry.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

namespace trellis {

namespace {

// Sizes are long double: a product of absurd values stays a (huge) number instead of
// wrapping around, and the comparison with the 64-bit limit below catches it.
using Bytes = long double;
constexpr Bytes kFloat = 4;

// Optimizer buffers per parameter, as allocated by make_optimizer().
Bytes optimizer_state_per_param(const TrainConfig& c) { return optimizer_state_buffers(c.optim); }

std::string gib(Bytes bytes) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.3Lg GiB", bytes / (1024.0L * 1024.0L * 1024.0L));
  return buf;
}

std::string key_value(const TrainConfig& c, const std::string& key) {
  const ConfigEntry* entry = find_config_entry(key);
  return key + " = " + (entry ? entry->format(c) : std::string("?"));
}

}  // namespace

MemoryEstimate estimate_memory(const TrainConfig& c, const DataShape& data, int dp, int tp) {
  const ModelSizes model = model_registration(c.model.type).sizes(c.model, data, c.derived.vocab);
  const Bytes split = static_cast<Bytes>(std::max(tp, 1)) * std::max(c.parallel.pp, 1);
  const Bytes state = optimizer_state_per_param(c) / (c.parallel.zero ? std::max(dp, 1) : 1);
  // Mixed precision adds the weights' compute copy (at most a float each).
  const Bytes compute_copy = c.precision.mode != Precision::fp32 ? 1 : 0;
  MemoryEstimate e;
  e.state_bytes = model.params / split * kFloat * (2 + state + compute_copy);
  e.state_key = model.params_key;

  const Bytes micro = c.micro_batch() > 0 ? c.micro_batch() : c.local_batch(std::max(dp, 1));
  // The model holds one micro-batch; evaluation runs its batches in pieces of that size.
  const bool eval_sized = c.train.eval_batch > micro && !c.data.test.empty();
  const Bytes capacity = micro;
  const std::string batch_key =
      c.train.micro_batch > 0 ? "train.micro_batch" : "train.global_batch";
  e.sample_activation_bytes = model.per_sample / split * kFloat;
  e.activation_bytes = capacity * e.sample_activation_bytes;
  e.sample_key = model.sample_key;
  e.batch_key = batch_key;
  const Bytes row = data.seq_len > 0 ? 2 * static_cast<Bytes>(data.seq_len) * 4
                                     : static_cast<Bytes>(data.feature_numel) * kFloat + 4;
  // The host/device batch buffers hold a whole local batch (or an evaluation batch), and the
  // sampler one index per local sample.
  const Bytes local = static_cast<Bytes>(c.local_batch(std::max(dp, 1)));
  const Bytes buffer_rows =
      std::max(local, eval_sized ? static_cast<Bytes>(c.train.eval_batch) : Bytes{0});
  e.buffer_bytes = buffer_rows * row + local * 8;
  e.buffer_key = local >= buffer_rows ? "train.global_batch" : "train.eval_batch";
  return e;
}

void check_memory_estimate(const TrainConfig& config, const DataShape& data, int dp, int tp,
                           std::int64_t available_bytes) {
  const MemoryEstimate e = estimate_memory(config, data, dp, tp);
  // Activations grow with the model and the batch: the batch is to blame when an ordinary
  // batch of this model would fit, the model when it would not.
  constexpr Bytes kOrdinaryBatch = 1000;
  const std::string& activation_key =
      e.sample_activation_bytes * kOrdinaryBatch <= static_cast<Bytes>(available_bytes)
          ? e.batch_key
          : e.sample_key;
  const std::string* key = &e.state_key;
  Bytes largest = e.state_bytes;
  if (e.activation_bytes > largest) largest = e.activation_bytes, key = &activation_key;
  if (e.buffer_bytes > largest) largest = e.buffer_bytes, key = &e.buffer_key;
  const std::string parts = " (parameters, gradients and optimizer state " + gib(e.state_bytes) +
                            ", activations " + gib(e.activation_bytes) + ", batch buffers " +
                            gib(e.buffer_bytes) + ")";
  if (!(e.total() < static_cast<Bytes>(std::numeric_limits<std::int64_t>::max())))
    throw ConfigError("config key " + key_value(config, *key) +
                      ": the memory it needs does not fit in a 64-bit byte count" + parts);
  if (e.total() > static_cast<Bytes>(available_bytes))
    throw ConfigError("config key " + key_value(config, *key) + ": one rank needs an estimated " +
                      gib(e.total()) + parts + ", more than the " + gib(available_bytes) +
                      " available; reduce " + *key);
}

InferenceMemory estimate_inference_memory(const TrainConfig& config, const DataShape& data,
                                          std::int64_t batch) {
  const ModelSizes model =
      model_registration(config.model.type).sizes(config.model, data, config.derived.vocab);
  InferenceMemory m;
  m.param_bytes = model.params * kFloat;
  m.sample_activation_bytes = model.per_sample * kFloat;
  m.activation_bytes = static_cast<Bytes>(batch) * m.sample_activation_bytes;
  return m;
}

std::int64_t default_inference_batch(const TrainConfig& config, const DataShape& data,
                                     std::int64_t available_bytes) {
  const Bytes per_sample = estimate_inference_memory(config, data, 1).sample_activation_bytes;
  const Bytes budget =
      std::min<Bytes>(kInferenceBudgetBytes, static_cast<Bytes>(available_bytes) / 4);
  const Bytes fits = per_sample > 0 ? budget / per_sample : kMaxInferenceBatch;
  return static_cast<std::int64_t>(
      std::max<Bytes>(1, std::min<Bytes>(kMaxInferenceBatch, std::floor(fits))));
}

void check_inference_memory(const TrainConfig& config, const DataShape& data, std::int64_t batch,
                            const std::string& option, std::int64_t available_bytes) {
  const InferenceMemory m = estimate_inference_memory(config, data, batch);
  if (m.total() <= static_cast<Bytes>(available_bytes)) return;
  const Bytes room = static_cast<Bytes>(available_bytes) - m.param_bytes;
  const Bytes fits =
      m.sample_activation_bytes > 0 && room > 0 ? std::floor(room / m.sample_activation_bytes) : 0;
  throw ConfigError(
      option + " " + std::to_string(batch) + ": the model needs an estimated " + gib(m.total()) +
      " (parameters " + gib(m.param_bytes) + ", activations " + gib(m.activation_bytes) +
      "), more than the " + gib(available_bytes) + " available; " +
      (fits >= 1 ? option + " " + std::to_string(static_cast<long long>(fits)) +
                       " or less would fit (leave it out: a batch that fits is chosen)"
                 : std::string("the parameters alone do not fit")));
}

std::int64_t available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    long long kib = 0;
    if (fields >> kib) return static_cast<std::int64_t>(kib) * 1024;
  }
  const long pages = sysconf(_SC_AVPHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0) return static_cast<std::int64_t>(pages) * page_size;
  return std::numeric_limits<std::int64_t>::max();  // unknown: do not refuse
}

}  // namespace trellis
