// What one optimizer step produced, as the step runner reports it: the one record every
// metrics sink, the progress bar and the stop policy read.
#pragma once

#include "trellis/comm/collective_tally.hpp"

#include <cstdint>

namespace trellis {

// Seconds spent in each phase (of one step, or summed over several).
struct StepTimes {
  double data = 0;        // reading and uploading this rank's part of the batch
  double compute = 0;     // forward + backward, without the tp collectives
  double tp_comm = 0;     // tensor-parallel collectives inside forward/backward
  double pipeline = 0;    // waiting for and moving activations between stages (bubble + p2p)
  double comm = 0;        // exposed data-parallel communication (what overlap did not hide)
  double optimizer = 0;   // norm, clipping, update
  double checkpoint = 0;  // writing checkpoints
  double total = 0;       // wall time of the step(s), checkpoints excluded

  StepTimes& operator+=(const StepTimes& o) {
    data += o.data, compute += o.compute, tp_comm += o.tp_comm, pipeline += o.pipeline;
    comm += o.comm, optimizer += o.optimizer, checkpoint += o.checkpoint, total += o.total;
    return *this;
  }
};

// What this rank issued over each axis of the grid in one step (comm/collective_tally.hpp):
// the float traffic of the layers, the gradient exchange and the pipeline; not the few-scalar
// reductions of the loss and the norm, which go to MPI directly.
struct StepCollectives {
  CollectiveTally tp, dp, pp;
  CollectiveTally embedding;  // the tied table's group (first and last pipeline stage)
};

struct StepRecord {
  std::int64_t step = 0;            // optimizer steps completed, this one included (1-based)
  std::int64_t epoch = 0;           // 0-based
  float lr = 0;                     // the learning rate this step used
  double loss_sum = 0;              // over the global batch (reduced over every rank)
  double correct = 0;               // correct predictions over the global batch
  double targets = 0;               // loss terms of the global batch (samples x rows per sample)
  double samples = 0;               // samples of the global batch
  double grad_norm = 0;             // global norm before clipping
  bool skipped = false;             // non-finite loss or gradients: parameters unchanged
  bool masks_changed = false;       // the pruning masks were recomputed after this step
  float loss_scale = 1;             // the loss scale this step's gradients carried (1: no scaling)
  std::int64_t overflow_steps = 0;  // steps skipped by the loss scaler so far (whole run)
  double grad_wire_bytes = 0;       // data-parallel gradient bytes this rank sent this step
  double grad_fp32_bytes = 0;       // what an uncompressed fp32 exchange would have sent
  StepTimes times;
  StepCollectives collectives;

  double loss() const { return targets > 0 ? loss_sum / targets : 0.0; }
};

}  // namespace trellis
