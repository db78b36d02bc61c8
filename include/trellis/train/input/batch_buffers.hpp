// One rank's batch buffers, sized once for the largest batch it will load (training local
// batch or evaluation batch). Loaders write the host mirrors; upload() copies them to the
// device (a no-op on host backends, where mirror and device view are one allocation).
//
//   classifiers:      features [capacity, feature_numel] float, targets [capacity] labels
//   language models:  tokens   [capacity, seq_len] int32,       targets [capacity, seq_len]
//                     (targets are the inputs shifted by one token)
#pragma once

#include "trellis/core/kokkos_types.hpp"
#include "trellis/kernels/views.hpp"
#include "trellis/parallel/pipeline_engine.hpp"

#include <cstdint>

namespace trellis {

struct BatchBuffers {
  // feature_numel > 0 for classifiers; seq_len > 0 for language models (then features empty).
  BatchBuffers(std::int64_t capacity, std::int64_t feature_numel, std::int64_t seq_len);

  std::int64_t capacity, feature_numel, seq_len;
  std::int64_t rows_per_sample;  // targets per sample: 1, or seq_len
  FloatView features;            // [capacity * feature_numel]
  IntView tokens;                // [capacity * seq_len]
  IntView targets;               // [capacity * rows_per_sample]
  FloatView::HostMirror host_features;
  IntView::HostMirror host_tokens;
  IntView::HostMirror host_targets;

  void upload(std::int64_t samples);

  // Samples [first, first + count) as model input and loss targets.
  ConstMatrix feature_rows(std::int64_t first, std::int64_t count) const;
  kernels::ConstLabels token_rows(std::int64_t first, std::int64_t count) const;
  kernels::ConstLabels target_rows(std::int64_t first, std::int64_t count) const;
  // The same samples as a micro-batch: input (features or tokens) and targets; ctx is left
  // for the caller.
  MicroBatch micro_batch(std::int64_t first, std::int64_t count) const;
};

}  // namespace trellis
