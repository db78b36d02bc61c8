// What an evaluation measured: the record the evaluation (train/loop/evaluate.hpp) returns and
// the sinks, early stopping and `trellis eval` report.
#pragma once

#include <cstdint>

namespace trellis {

struct EvalResult {
  double loss = 0;           // mean cross-entropy per target (sample or token), in nats
  double accuracy = 0;       // fraction of targets whose argmax is right
  std::int64_t samples = 0;  // samples (images, sequences) evaluated over all ranks
  std::int64_t targets = 0;  // loss terms: samples x rows per sample
  double bits_per_target() const { return loss / 0.6931471805599453; }
};

}  // namespace trellis
