// A rough memory estimate of one rank, from the config and the data's shapes, checked before
// any large buffer is allocated: an absurd size then ends with a ConfigError naming the key
// responsible and the size in GiB, not with std::bad_alloc or a Kokkos allocation failure.
//
// The estimate counts float parameters, their gradients, the optimizer's state (divided
// over tp x pp, and the state over dp with ZeRO-1) and the mixed-precision weight copy, the
// model's activations and gradients at its capacity (max(micro-batch, eval_batch) samples),
// and the host batch buffers. It is an
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

// Host memory available now: MemAvailable from /proc/meminfo, else sysconf's free pages.
std::int64_t available_memory_bytes();

}  // namespace trellis
