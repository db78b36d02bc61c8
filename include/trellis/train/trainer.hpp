// Trainer: the data-parallel training loop, for any nn::Model and data source.
//
// Per optimizer step, on every rank:
//   source -> this rank's block of the global batch (HDF5 hyperslab reads) -> upload
//   for each micro-batch: forward, loss (scaled 1/(global_batch x rows per sample)),
//                         backward (grads +=)
//   bucketed all-reduce of the flat gradient over dp -> clip -> lr(step) -> optimizer step
//   -> metrics (rank 0) -> evaluation at the end of each epoch
// Every buffer is sized in the constructor; the step itself allocates nothing.
#pragma once

#include "trellis/comm/device_binding.hpp"
#include "trellis/comm/process_grid.hpp"
#include "trellis/core/log.hpp"
#include "trellis/nn/model.hpp"
#include "trellis/nn/parameter_store.hpp"
#include "trellis/nn/softmax_xent.hpp"
#include "trellis/optim/optimizer.hpp"
#include "trellis/optim/schedule.hpp"
#include "trellis/parallel/grad_allreduce.hpp"
#include "trellis/train/batch_buffers.hpp"
#include "trellis/train/data_source.hpp"
#include "trellis/train/evaluate.hpp"
#include "trellis/train/metrics_log.hpp"
#include "trellis/train/train_config.hpp"

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <optional>

namespace trellis {

// Seconds spent in each phase of the steps since the last log line.
struct StepTimes {
  double data = 0, compute = 0, comm = 0, optimizer = 0, total = 0;
  std::int64_t steps = 0, samples = 0;
};

class Trainer {
 public:
  // Collective over `world`: builds the process grid, checks the batch arithmetic, opens the
  // datasets, builds and initialises the model and writes config.ini. Any failure, on any
  // rank, stops every rank before the first step.
  Trainer(TrainConfig config, MPI_Comm world, const NodeBinding& node, const Logger& log);

  // Trains for train.epochs (or train.max_steps), then writes model.h5 and summary.json.
  void run();

  const nn::ParameterStore& parameters() const { return store_; }

 private:
  struct StepStats {
    double loss_sum = 0, correct = 0;  // over the global batch (reduced)
    double targets = 0, samples = 0;   // loss terms and samples of the global batch
    double grad_norm = 0;
  };

  void setup(MPI_Comm world);
  StepStats train_step(std::int64_t epoch, std::int64_t step_in_epoch, StepTimes& times);
  void log_step(std::int64_t epoch, const StepStats& stats, float lr, StepTimes& times);
  EvalResult evaluate_and_log(std::int64_t epoch);
  std::int64_t total_steps() const;

  TrainConfig config_;
  NodeBinding node_;
  Logger log_;
  std::unique_ptr<ProcessGrid> grid_;
  std::unique_ptr<TrainSource> train_data_;
  std::unique_ptr<EvalSource> test_data_;
  nn::ParameterStore store_;
  std::unique_ptr<nn::Model> model_;
  std::unique_ptr<nn::SoftmaxCrossEntropy> loss_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<GradientAllReducer> reducer_;
  std::unique_ptr<BatchBuffers> buffers_;
  std::unique_ptr<MetricsLog> metrics_;
  std::int64_t global_step_ = 0;  // optimizer steps completed
  std::optional<EvalResult> last_eval_;
};

}  // namespace trellis
