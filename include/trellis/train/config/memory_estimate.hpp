// A rough memory estimate of one rank, from the config and the data's shapes, checked before
// any large buffer is allocated: an absurd size then ends with a ConfigError naming the key
// responsible and the size in GiB, not with std::bad_alloc or a Kokkos allocation failure.
//
// The estimate counts float parameters, their gradients, the optimizer's state (divided
// over tp x pp, and the state over dp with ZeRO-1) and the mixed-precision weight copy, the
// model's activations and gradients at its capacity (a micro-batch: evaluation runs in pieces
// of that size), and the host batch buffers (a local batch, or an evaluation batch). It is an
// order of magnitude, meant to catch mistakes, not to plan a job.
#pragma once

#include "trellis/data/data_shape.hpp"
#include "trellis/train/config/train_config.hpp"

#include <cstdint>
#include <string>

namespace trellis {

struct MemoryEstimate {
  long double state_bytes = 0;              // parameters + gradients + optimizer state
  long double activation_bytes = 0;         // activations and their gradients at capacity
  long double buffer_bytes = 0;             // batch buffers and sampler indices
  long double sample_activation_bytes = 0;  // activations of one sample
  std::string state_key;                    // the model key that sizes the parameters
  std::string sample_key;                   // the model key that sizes one sample's activations
  std::string batch_key;                    // the key that sets the capacity (samples per call)
  std::string buffer_key;
  long double total() const { return state_bytes + activation_bytes + buffer_bytes; }
};

// Needs resolve_batch() done (the micro-batch).
MemoryEstimate estimate_memory(const TrainConfig& config, const DataShape& data, int dp, int tp);

// Throws ConfigError naming the key behind the largest part when the estimate exceeds
// available_bytes, or when a byte count does not fit in 64 bits.
void check_memory_estimate(const TrainConfig& config, const DataShape& data, int dp, int tp,
                           std::int64_t available_bytes);

// Inference (eval, quantize, generate) of the model on `batch` samples per call on one rank:
// its parameters (no gradients, no optimizer state) and the activations of the batch (the
// layers keep their gradient buffers too, so the training figure per sample).
struct InferenceMemory {
  long double param_bytes = 0, activation_bytes = 0, sample_activation_bytes = 0;
  long double total() const { return param_bytes + activation_bytes; }
};
InferenceMemory estimate_inference_memory(const TrainConfig& config, const DataShape& data,
                                          std::int64_t batch);

// The batch an inference command takes when none is given: the largest whose activations
// fit in kInferenceBudgetBytes or a quarter of available_bytes, whichever is less, between 1
// and kMaxInferenceBatch. Small batches are no slower: they stay in cache.
constexpr std::int64_t kInferenceBudgetBytes = std::int64_t{512} << 20;
constexpr std::int64_t kMaxInferenceBatch = 1000;
std::int64_t default_inference_batch(const TrainConfig& config, const DataShape& data,
                                     std::int64_t available_bytes);

// ConfigError naming `option` ("eval --batch") when `batch` needs more than available_bytes,
// with the batch that would fit.
void check_inference_memory(const TrainConfig& config, const DataShape& data, std::int64_t batch,
                            const std::string& option, std::int64_t available_bytes);

// Host memory available now: MemAvailable from /proc/meminfo, else sysconf's free pages.
std::int64_t available_memory_bytes();

}  // namespace trellis
