// The model under training on this rank, built once at set-up: this pipeline stage's layers
// (one copy per micro-batch in flight, all sharing one ParameterStore), the pipeline engine
// that runs them, the data-parallel gradient reduction (overlapped buckets, ZeRO-1), the
// optimizer (over this rank's update shard), the learning-rate schedule and the norm mask.
// Everything is allocated here; the training step allocates nothing.
#pragma once

#include "trellis/comm/node_shared_window.hpp"
#include "trellis/comm/process_grid.hpp"
#include "trellis/nn/model.hpp"
#include "trellis/nn/parameter_store.hpp"
#include "trellis/optim/clip.hpp"
#include "trellis/optim/loss_scaler.hpp"
#include "trellis/optim/optimizer.hpp"
#include "trellis/optim/schedule.hpp"
#include "trellis/parallel/gradient_sync.hpp"
#include "trellis/parallel/pipeline_engine.hpp"
#include "trellis/parallel/zero_groups.hpp"
#include "trellis/train/config/train_config.hpp"
#include "trellis/train/input/data_source.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace trellis {

class TrainingModel {
 public:
  // Collective over the grid (tensor-parallel layers, dp-synchronised BatchNorm).
  // capacity: the most samples one forward/backward call sees (micro-batch or eval batch);
  // total_steps: the run's length, for the schedule.
  TrainingModel(const TrainConfig& config, const DataShape& shape, const ProcessGrid& grid,
                std::int64_t capacity, std::int64_t total_steps);
  TrainingModel(const TrainingModel&) = delete;
  TrainingModel& operator=(const TrainingModel&) = delete;

  nn::ParameterStore& store() { return store_; }
  const nn::ParameterStore& store() const { return store_; }
  nn::Model& model() { return *model_; }
  const nn::Model& model() const { return *model_; }
  PipelineEngine& engine() { return *engine_; }
  // The group the ZeRO shards split over (the dp group unless hybrid sharding splits it): the
  // gradient norm of a sharded update sums over it.
  const MpiComm& shard_group() const { return *shard_mpi_; }
  GradientSync& sync() { return *sync_; }
  const GradientSync& sync() const { return *sync_; }
  Optimizer& optimizer() { return *optimizer_; }
  const Optimizer& optimizer() const { return *optimizer_; }
  const LrSchedule& schedule() const { return *schedule_; }
  // The schedule over another run length (a resumed run keeping the length it started with).
  void set_schedule_length(const TrainConfig& config, std::int64_t total_steps) {
    schedule_ = std::make_unique<LrSchedule>(config.schedule_spec(total_steps));
  }
  const NormMask& norm_mask() const { return norm_mask_; }
  LossScaler& loss_scaler() { return *loss_scaler_; }
  const LossScaler& loss_scaler() const { return *loss_scaler_; }
  // Mixed precision: which kernels run and why, for the set-up log ("" for fp32).
  const std::string& precision_notice() const { return precision_notice_; }
  // After every change to the parameters (optimizer step, checkpoint load): rebuilds the
  // 16-bit compute copy the GEMM layers read. `step`: optimizer steps taken.
  void parameters_changed(std::int64_t step) { store_.refresh_compute_copy(step); }
  // After the parameters were read (a checkpoint, init.weights): ZeRO-3 read them into the
  // shard, so the outer ranges are gathered and every unit's slot is stale.
  void parameters_loaded(std::int64_t step) {
    if (sync_->params_sharded()) sync_->finish_update();
    parameters_changed(step);
  }

  // Parameters this stage shares with another stage (the GPT's tied token table on the first
  // and last stage): their gradients are summed over the embedding group before the dp sync.
  const std::vector<std::string>& tied() const { return tied_; }
  // Whether parameter `name` is this stage's copy of a tensor another stage owns.
  bool is_stage_copy(const std::string& name) const;

  // The whole model's parameter count, whatever the layout. Collective over tp and pp.
  std::int64_t logical_parameter_count(const ProcessGrid& grid) const;
  std::int64_t optimizer_state_floats() const;  // this rank's
  // How the dp gradients are exchanged, for the set-up log.
  std::string describe_exchange(const TrainConfig& config) const;

  // parallel.grad_exchange resolved: whether the dp group exchanges through node shared
  // memory. Collective over dp; ConfigError for shared_memory where it cannot apply.
  static bool use_shared_exchange(const ParallelConfig& parallel, const ProcessGrid& grid);

 private:
  std::unique_ptr<NodeSharedWindow> shared_window_;  // before store_: holds its gradients
  int grad_exchange_dp_ = 1;
  const MpiComm* shard_mpi_ = nullptr;
  nn::ParameterStore store_;
  std::unique_ptr<PipelineEngine> engine_;  // owns the layers (a copy per micro-batch in flight)
  nn::Model* model_ = nullptr;              // the engine's slot 0
  std::vector<std::string> tied_;
  std::unique_ptr<ZeroGroups> zero_groups_;  // ZeRO-2/3: the shard and replica groups
  std::unique_ptr<GradientSync> sync_;
  NormMask norm_mask_;  // [update size]: gradients this rank counts in the global norm
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<LossScaler> loss_scaler_;
  std::string precision_notice_;
};

}  // namespace trellis
