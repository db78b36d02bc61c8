// Trainer: wires the parts of a training run over the dp x tp x pp process grid together and
// runs the loop over steps.
//
// owns: the process grid (comm/process_grid), the datasets (input/), the TrainingModel
//       (loop/training_model: layers, pipeline engine, gradient sync, optimizer, schedule),
//       the batch buffers, StepRunner (loop/step_runner), Pruner (loop/pruner),
//       CheckpointManager (loop/checkpoint_manager), StopPolicy and EarlyStopping
//       (loop/stop_policy), Metrics and its sinks (monitoring/), PerformanceModel
//       (monitoring/performance_model), FaultInjector and Watchdog (faults/)
// see:  src/train/README.md for where each concern lives
//
//   setup      process grid -> node-local staging -> datasets -> TrainingModel (layers,
//              pipeline engine, dp reduction, optimizer, schedule) -> performance model ->
//              resume (before run.dir is touched) -> config.ini and the metrics sinks
//   each step  StepRunner (one optimizer step -> StepRecord) -> Metrics (JSONL, TensorBoard,
//              console) -> evaluation when due -> StopPolicy (one agreed decision: signal,
//              time limit, checkpoint by clock, budget; early stop after evaluations) ->
//              CheckpointManager when due
//   end        a final checkpoint when the run checkpoints, model.h5, summary.json
//
// Errors follow the process' one policy (error_policy.hpp): set-up phases are agreed over the
// world; an error one rank meets alone during the run ends the whole job at once.
#pragma once

#include "trellis/comm/device_binding.hpp"
#include "trellis/comm/process_grid.hpp"
#include "trellis/core/error.hpp"
#include "trellis/core/log.hpp"
#include "trellis/train/config/train_config.hpp"
#include "trellis/train/faults/fault_injector.hpp"
#include "trellis/train/faults/watchdog.hpp"
#include "trellis/train/input/batch_buffers.hpp"
#include "trellis/train/input/data_source.hpp"
#include "trellis/train/loop/checkpoint_manager.hpp"
#include "trellis/train/loop/memory_planning.hpp"
#include "trellis/train/loop/pruner.hpp"
#include "trellis/train/loop/step_runner.hpp"
#include "trellis/train/loop/stop_policy.hpp"
#include "trellis/train/loop/training_model.hpp"
#include "trellis/train/monitoring/metrics.hpp"
#include "trellis/train/monitoring/performance_model.hpp"

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <optional>

namespace trellis {

class Trainer {
 public:
  // Collective over `world`: everything up to the first step (see above). Any failure, on any
  // rank, stops every rank before the first step.
  // dry_run: the checks only (the run directory, the data, the layout, the model and its
  // memory estimate), then run() returns without training; nothing is written or deleted.
  Trainer(TrainConfig config, MPI_Comm world, const NodeBinding& node, const Logger& log,
          bool dry_run = false);
  // Stops the training data's loader thread first: the members destroyed after it may close
  // HDF5 files, and HDF5 is not thread-safe.
  ~Trainer();

  // Trains for train.epochs (or train.max_steps), then writes model.h5 and summary.json:
  // ExitCode::ok. Stopped early by a signal or time limit: writes a checkpoint and returns
  // ExitCode::stopped_resumable (no model.h5).
  ExitCode run();

  const nn::ParameterStore& parameters() const { return model_->store(); }

 private:
  void make_grid(MPI_Comm world);  // and the batch arithmetic that needs dp
  // A fresh run into a run.dir that holds an earlier run is refused (ConfigError naming the
  // ways out) unless run.overwrite, which deletes the earlier run first; a resumed run
  // continues it.
  void claim_run_directory();
  void open_data();
  void build_parts();
  void open_outputs(bool resumed);
  void log_setup() const;
  std::string run_length() const;  // "length: 400 steps (train.max_steps, ...)"
  // A resumed run of another length: the schedule keeps its length, or is stretched (asked).
  void keep_or_stretch_schedule(const ResumePoint& point);
  ExitCode train();
  void checkpoint();
  // After the pruning masks changed: their sparsity to the metrics sinks. Collective.
  void report_sparsity();
  EvalResult evaluate(std::int64_t epoch);
  // summary.json and the closing lines; model.h5 too unless the run stopped early (75).
  void finish(const std::string& finish_reason, bool write_weights = true);
  std::int64_t step() const { return runner_->completed(); }

  TrainConfig config_;
  NodeBinding node_;
  Logger log_;
  bool dry_run_ = false;
  std::unique_ptr<ProcessGrid> grid_;
  std::unique_ptr<TrainSource> train_data_;
  std::unique_ptr<EvalSource> test_data_;
  std::unique_ptr<BatchBuffers> buffers_;
  std::int64_t total_steps_ = 0;
  std::unique_ptr<TrainingModel> model_;
  std::unique_ptr<FaultInjector> faults_;
  std::unique_ptr<Pruner> pruner_;
  std::unique_ptr<StepRunner> runner_;
  std::unique_ptr<CheckpointManager> checkpoints_;
  std::unique_ptr<PerformanceModel> performance_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<StopPolicy> stop_policy_;
  std::unique_ptr<EarlyStopping> early_stopping_;
  std::unique_ptr<Watchdog> watchdog_;
  std::int64_t parameter_count_ = 0;
  MemoryPlan memory_plan_;  // this layout's, from the start-up checks
  std::int64_t checkpointed_step_ = 0;  // the step of the newest checkpoint (or the start)
  std::optional<EvalResult> last_eval_;
};

}  // namespace trellis
