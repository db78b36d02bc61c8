// Trainer: the training loop over the dp x tp x pp process grid, for any nn::Model and data source.
//
// Per optimizer step, on every rank:
//   source -> this dp rank's block of the global batch (HDF5 hyperslab reads) -> upload
//   for each micro-batch: forward, loss (scaled 1/(global_batch x rows per sample)),
//                         backward (grads +=; tp collectives inside the layers); during the
//                         last one, gradient buckets start their dp all-reduce (or ZeRO-1
//                         reduce-scatter) as backward fills them (GradientSync)
//   wait for the buckets -> global norm (masked, reduced over tp [and dp with ZeRO-1]) -> clip
//   -> lr(step) -> optimizer step (own shard with ZeRO-1, then all-gather)
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
#include "trellis/parallel/gradient_sync.hpp"
#include "trellis/parallel/pipeline_engine.hpp"
#include "trellis/train/batch_buffers.hpp"
#include "trellis/train/checkpoint_file.hpp"
#include "trellis/train/data_source.hpp"
#include "trellis/train/evaluate.hpp"
#include "trellis/train/gpu_telemetry.hpp"
#include "trellis/train/metrics_log.hpp"
#include "trellis/train/monitor.hpp"
#include "trellis/train/progress.hpp"
#include "trellis/train/stop_control.hpp"
#include "trellis/train/tensorboard.hpp"
#include "trellis/train/train_config.hpp"
#include "trellis/train/watchdog.hpp"

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <optional>

namespace trellis {

// Seconds spent in each phase of the steps since the last log line.
struct StepTimes {
  double data = 0, compute = 0, comm = 0, optimizer = 0, total = 0;
  double pipeline = 0;    // waiting for and moving activations between stages (bubble + p2p)
  double checkpoint = 0;  // writing checkpoints
  double tp_comm = 0;     // tensor-parallel collectives inside forward/backward (not in compute)
  std::int64_t steps = 0, samples = 0;

  StepTimes& operator+=(const StepTimes& o) {
    data += o.data, compute += o.compute, comm += o.comm, optimizer += o.optimizer;
    total += o.total, pipeline += o.pipeline, checkpoint += o.checkpoint, tp_comm += o.tp_comm;
    steps += o.steps, samples += o.samples;
    return *this;
  }
};

class Trainer {
 public:
  // Collective over `world`: builds the process grid, checks the batch arithmetic, opens the
  // datasets, builds and initialises the model and writes config.ini. Any failure, on any
  // rank, stops every rank before the first step.
  Trainer(TrainConfig config, MPI_Comm world, const NodeBinding& node, const Logger& log);

  // Trains for train.epochs (or train.max_steps), then writes model.h5 and summary.json:
  // ExitCode::ok. Stopped early by a signal or time limit: writes a checkpoint and returns
  // ExitCode::stopped_resumable (no model.h5). An error on any rank ends the whole job
  // (MPI_Abort with the error's exit code and this rank's message): never a hang.
  ExitCode run();

  const nn::ParameterStore& parameters() const { return store_; }

 private:
  struct StepStats {
    double loss_sum = 0, correct = 0;  // over the global batch (reduced)
    double targets = 0, samples = 0;   // loss terms and samples of the global batch
    double grad_norm = 0;
    bool skipped = false;  // non-finite loss or gradients: no update
  };

  void setup(MPI_Comm world);
  ExitCode train_and_save();  // run() without the error policy
  [[noreturn]] void abort_job(const std::string& message, ExitCode code) const;
  // Checkpoints (trainer_checkpoint.cpp): collective over the world.
  void save_checkpoint();
  // Every tensor a checkpoint holds, as this rank's pieces; full_state receives the whole
  // optimizer-state buffers the optim/ pieces point into (gathered over dp with ZeRO-1).
  std::vector<TensorPiece> checkpoint_pieces(std::vector<FloatView>& full_state);
  // ckpt.resume: loads a checkpoint (auto: the newest that verifies, falling back to older
  // ones with a warning); returns whether it did.
  bool resume_if_asked();
  void skip_step(StepStats& stats);  // the fault.nonfinite policy
  bool fault_injected(const char* kind) const;
  void inject_fault_if_asked() const;
  StepStats train_step(std::int64_t epoch, std::int64_t step_in_epoch, StepTimes& times);
  CostEstimate run_cost() const;
  void measure_model_and_peak();  // model_flops_, peak_tflops_ (collective)
  void update_early_stop(
      const EvalResult& result);  // of this run so far, and projected to its last step
  void write_results(double seconds, double throughput, const StepTimes& totals,
                     const std::string& finish_reason);
  void log_step(std::int64_t epoch, const StepStats& stats, float lr, StepTimes& times);
  EvalResult evaluate_and_log(std::int64_t epoch);
  std::int64_t total_steps() const;
  // The whole model's parameter count, whatever the layout. Collective over pp.
  std::int64_t logical_parameter_count() const;
  std::int64_t optimizer_state_floats() const;  // this rank's optimizer state

  TrainConfig config_;
  NodeBinding node_;
  Logger log_;
  std::unique_ptr<ProcessGrid> grid_;
  std::unique_ptr<TrainSource> train_data_;
  std::unique_ptr<EvalSource> test_data_;
  nn::ParameterStore store_;
  std::unique_ptr<PipelineEngine> engine_;  // owns the model (a copy per micro-batch in flight)
  nn::Model* model_ = nullptr;              // the engine's slot 0
  std::vector<std::string> tied_;           // parameters shared with another pipeline stage
  ConstFloatView norm_mask_;  // [update size]: gradients this rank counts in the global norm
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<GradientSync> sync_;  // dp reduction (overlapped), ZeRO-1
  std::unique_ptr<BatchBuffers> buffers_;
  std::unique_ptr<MetricsLog> metrics_;
  std::unique_ptr<TensorBoardWriter> tensorboard_;  // events.out.tfevents.* in run.dir
  std::int64_t global_step_ = 0;                    // optimizer steps completed
  std::int64_t parameter_count_ = 0;
  std::int64_t skipped_steps_ = 0, consecutive_skips_ = 0;
  std::unique_ptr<StopControl> stop_;
  std::unique_ptr<ProgressBar> progress_;
  std::unique_ptr<GpuTelemetry> gpu_;  // NVML (CUDA builds); invalid samples elsewhere
  bool progress_bar_ = false;
  Stopwatch run_watch_;
  std::int64_t first_step_ = 0;  // where this run started (a resumed run: its checkpoint)
  double model_flops_ = 0;       // forward + backward FLOPs per sample of the whole model
  double peak_tflops_ = 0;       // per device
  std::string peak_source_;
  // Early stopping on an evaluation metric (early_stop.*).
  double best_metric_ = 0;
  std::int64_t evals_without_gain_ = 0;
  bool have_best_ = false, early_stop_ = false;
  std::unique_ptr<Watchdog> watchdog_;
  std::optional<EvalResult> last_eval_;
};

}  // namespace trellis
