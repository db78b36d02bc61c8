#include "trellis/train/loop/training_model.hpp"

#include "trellis/comm/mpi_check.hpp"
#include "trellis/core/format.hpp"
#include "trellis/core/host_simd.hpp"
#include "trellis/parallel/grad_norm.hpp"
#include "trellis/parallel/pipeline_schedule.hpp"
#include "trellis/parallel/tensor_ownership.hpp"
#include "trellis/parallel/zero_layout.hpp"
#include "trellis/train/model/model_registry.hpp"

#include <algorithm>

namespace trellis {

TrainingModel::TrainingModel(const TrainConfig& config, const DataShape& shape,
                             const ProcessGrid& grid, std::int64_t capacity,
                             std::int64_t total_steps) {
  const nn::TensorParallel tp{grid.size(Axis::tp) > 1 ? &grid.communicator(Axis::tp) : nullptr,
                              config.parallel.sequence_parallel};
  const MpiComm& dp = grid.dp();
  grad_exchange_dp_ = dp.size();
  const int pp = grid.size(Axis::pp), stage = grid.coords().pp;
  const int micro_batches = static_cast<int>(config.accumulation_steps(dp.size()));
  // Pipeline: this stage's units, and one copy of its layers per micro-batch in flight.
  nn::StageRange range;
  if (pp > 1) {
    const std::vector<int> bounds =
        stage_boundaries(config.parallel.stages, model_unit_costs(config.model, shape), pp);
    range.first_unit = bounds[static_cast<std::size_t>(stage)];
    range.end_unit = bounds[static_cast<std::size_t>(stage) + 1];
  }
  // One stage: the plain micro-batch loop, which is 1F1B's order with one slot.
  const PipelineSchedule schedule =
      pp > 1 ? config.parallel.schedule : PipelineSchedule::one_f_one_b;
  const int slots = in_flight(schedule, pp, stage, micro_batches);
  // Before the layers are built: they size their 16-bit operand buffers from it.
  // Every rank takes auto's choice from the slowest rank's measurement.
  const MPI_Comm world = grid.world().get();
  const nn::AgreeOnMinimum least_over_ranks = [world](double value) {
    TRELLIS_MPI(MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_DOUBLE, MPI_MIN, world));
    return value;
  };
  store_.set_autocast(nn::resolve_autocast(config.precision.mode, config.precision.kernels,
                                           precision_notice_, least_over_ranks),
                      config.precision.stochastic_rounding);
  const nn::RecomputeSpec recompute = recompute_spec(config.memory);
  // ZeRO-2/3: every block a unit that splits evenly over the dp ranks (zero_layout.hpp).
  if (config.parallel.zero >= 2)
    store_.set_unit_alignment(GradientSync::padding_multiple(dp.size()));
  std::vector<std::unique_ptr<nn::Model>> replicas;
  const std::size_t first_offset = store_.registration_cursor();
  replicas.push_back(build_model(config.model, config.kernels, shape, capacity, store_, &dp, tp,
                                 range, recompute));
  for (int k = 1; k < slots; ++k) {
    store_.begin_replica(first_offset);
    replicas.push_back(build_model(config.model, config.kernels, shape, capacity, store_, &dp, tp,
                                   range, recompute));
    store_.end_replica();
  }
  model_ = replicas.front().get();
  tied_ = model_->tied_parameters();
  store_.pad_to_multiple(GradientSync::padding_multiple(dp.size()));  // even ZeRO-1 shards
  if (config.parallel.zero >= 2) {
    const ZeroLayout layout = zero_layout(store_.units(), store_.buffer_size());
    store_.place(config.parallel.zero >= 3 ? layout.placement() : std::vector<nn::Placement>{},
                 layout.physical_floats(), layout.placement(), layout.physical_floats());
  }
  if (use_shared_exchange(config.parallel, grid)) {
    shared_window_ = std::make_unique<NodeSharedWindow>(
        dp, GradientSync::shared_floats(store_.buffer_size(), config.parallel.zero >= 1));
    float* part = shared_window_->part(dp.rank());
    store_.finalize(config.train.seed, part,
                    config.parallel.zero >= 1 ? part + store_.buffer_size() : nullptr);
  } else {
    store_.finalize(config.train.seed);
  }

  GradientSyncOptions sync_options;
  sync_options.shared = shared_window_.get();
  sync_options.bucket_bytes = static_cast<std::size_t>(config.parallel.bucket_mb * 1024 * 1024);
  sync_options.overlap = config.parallel.overlap;
  sync_options.zero = config.parallel.zero;
  sync_options.wire = config.parallel.grad_dtype;
  sync_options.gather = config.parallel.gather_dtype;
  sync_options.powersgd.rank = config.parallel.powersgd_rank;
  sync_options.powersgd.start_step = config.parallel.powersgd_start_step;
  sync_options.powersgd.min_compression = config.parallel.powersgd_min_compression;
  sync_options.powersgd.seed = config.train.seed;
  Communicator* shard_group = &grid.communicator(Axis::dp);
  shard_mpi_ = &dp;
  if (config.parallel.zero >= 2) {
    zero_groups_ = std::make_unique<ZeroGroups>(dp, grid.communicator(Axis::dp), grid.backend(),
                                                config.parallel.zero_shard_ranks);
    shard_group = &zero_groups_->shard();
    shard_mpi_ = &zero_groups_->shard_mpi();
    sync_options.replica = zero_groups_->replica();
  }
  sync_ = std::make_unique<GradientSync>(*shard_group, store_, sync_options);
  for (const std::string& name : tied_) {  // summed over the two stages before the dp sync
    const nn::ParamInfo& info = store_.info(store_.index(name));
    sync_->hold_back(info.offset + info.numel);
  }
  const bool vocab_parallel = model_->local_classes() < model_->classes();
  engine_ = std::make_unique<PipelineEngine>(std::move(replicas), schedule,
                                             pp > 1 ? &grid.communicator(Axis::pp) : nullptr,
                                             vocab_parallel ? tp : nn::TensorParallel{});
  std::vector<std::string> copies;
  for (const std::string& name : tied_)
    if (is_stage_copy(name)) copies.push_back(name);
  optimizer_ = make_optimizer(config.optimizer_spec(), sync_->update_size(),
                              sync_->gather_shard(store_.decay_mask()));
  // Sharded, the optimizer keeps its shard of the mask: no rank keeps a byte per parameter of
  // the whole stage. Unsharded, the optimizer shares the store's.
  store_.release_decay_mask();
  norm_mask_ = NormMask(sync_->gather_shard(trellis::norm_mask(store_, grid.coords(), copies)));
  schedule_ = std::make_unique<LrSchedule>(config.schedule_spec(total_steps));
  loss_scaler_ = std::make_unique<LossScaler>(config.precision.loss_scale_spec());
}

bool TrainingModel::use_shared_exchange(const ParallelConfig& parallel, const ProcessGrid& grid) {
  const std::string& mode = parallel.grad_exchange;
  const MpiComm& dp = grid.dp();
  // A compressed wire is a communicator matter: shared memory has no wire to compress.
  const bool compressed = parallel.grad_dtype != Precision::fp32 || parallel.powersgd_rank > 0;
  if (parallel.grad_dtype != Precision::fp32 && parallel.powersgd_rank > 0)
    throw ConfigError(
        "parallel.powersgd_rank sends fp32 factors; it does not combine with "
        "parallel.grad_dtype = " +
        std::string(precision_name(parallel.grad_dtype)) + " (choose one)");
  if (mode == "shared_memory" && compressed)
    throw ConfigError(
        std::string("parallel.grad_exchange = shared_memory sums fp32 gradients "
                    "in place; ") +
        (parallel.powersgd_rank > 0
             ? std::string("parallel.powersgd_rank")
             : "parallel.grad_dtype = " + std::string(precision_name(parallel.grad_dtype))) +
        " needs communicator (or auto)");
  if (mode == "communicator" || dp.size() == 1 || compressed || parallel.zero >= 2) return false;
  // The portable build exchanges through the communicator, as a device build does.
  const bool host_mpi = kHostKernels && grid.backend() == CommBackend::mpi;
  const bool one_node = NodeSharedWindow::on_one_node(dp);  // collective: ask on every path
  if (mode == "shared_memory" && !(host_mpi && one_node))
    throw ConfigError(
        "parallel.grad_exchange = shared_memory needs a host build (not CUDA or portable), "
        "parallel.backend = mpi and every data-parallel rank on one node; this "
        "run has " +
        std::string(kHostKernels ? "a host" : "a device or portable") + " build, backend " +
        (grid.backend() == CommBackend::mpi ? "mpi" : "nccl") + ", dp group " +
        (one_node ? "on one node" : "spread over nodes") + " (use communicator or auto)");
  return host_mpi && one_node;
}

std::string TrainingModel::describe_exchange(const TrainConfig& config) const {
  if (grad_exchange_dp_ == 1) return "none (dp 1)";
  std::string text = shared_window_ ? "node shared memory" : "communicator";
  if (!shared_window_)
    text += format_text(", buckets of %.3g MiB", config.parallel.bucket_mb) +
            (config.parallel.overlap ? ", overlapped with backward" : "");
  if (config.parallel.grad_dtype != Precision::fp32)
    text += std::string(", ") + precision_name(config.parallel.grad_dtype) + " on the wire";
  if (config.parallel.powersgd_rank > 0)
    text += format_text(", PowerSGD rank %d from step %lld", config.parallel.powersgd_rank,
                        static_cast<long long>(config.parallel.powersgd_start_step));
  if (config.parallel.zero > 0) text += ", ZeRO-" + std::to_string(config.parallel.zero);
  if (zero_groups_ && zero_groups_->replica() != nullptr)
    text += " sharded over groups of " + std::to_string(zero_groups_->shard().size()) +
            " dp ranks, replicated " + std::to_string(zero_groups_->replica()->size()) +
            " times (hybrid)";
  return text;
}

bool TrainingModel::is_stage_copy(const std::string& name) const {
  // The first stage owns the tied table; the last stage's is the copy.
  return !model_->first_stage() && std::find(tied_.begin(), tied_.end(), name) != tied_.end();
}

std::int64_t TrainingModel::logical_parameter_count(const ProcessGrid& grid) const {
  std::int64_t total = 0;
  for (std::size_t i = 0; i < store_.size(); ++i) {
    const nn::ParamInfo& info = store_.info(i);
    if (owns_piece(info.shard.sharded(), is_stage_copy(info.name), DpCopies::distinct,
                   grid.coords()))
      total += static_cast<std::int64_t>(info.numel);
  }
  // Each tp rank holds its pieces, each pipeline stage its own layers.
  TRELLIS_MPI(MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_INT64_T, MPI_SUM, grid.tp().get()));
  TRELLIS_MPI(MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_INT64_T, MPI_SUM, grid.pp().get()));
  return total;
}

std::int64_t TrainingModel::optimizer_state_floats() const {
  std::int64_t total = 0;
  for (const auto& [name, view] : optimizer_->state())
    total += static_cast<std::int64_t>(view.extent(0));
  return total;
}

}  // namespace trellis
