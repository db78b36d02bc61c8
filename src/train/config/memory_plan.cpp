#include "trellis/train/config/memory_plan.hpp"

#include "trellis/comm/shape_only_communicator.hpp"
#include "trellis/core/error.hpp"
#include "trellis/core/format.hpp"
#include "trellis/nn/autocast.hpp"
#include "trellis/nn/buffer_pool.hpp"
#include "trellis/nn/parameter_store.hpp"
#include "trellis/optim/optimizer.hpp"
#include "trellis/parallel/gradient_sync.hpp"
#include "trellis/parallel/pipeline_engine.hpp"
#include "trellis/parallel/pipeline_schedule.hpp"
#include "trellis/parallel/zero_layout.hpp"
#include "trellis/train/model/model_registry.hpp"

#include <algorithm>
#include <memory>
#include <numeric>
#include <vector>

namespace trellis {

namespace {

// The start-up GEMM measurement (monitoring/utilisation.hpp): three 512 x 512 fp32 matrices,
// allocated after the model and the batch buffers, so they add to the workspace's peak.
constexpr std::int64_t kPeakGemmBytes = 3 * 512 * 512 * 4;

std::int64_t& at(MemoryPlan& plan, MemoryCategory c) {
  return plan.bytes[static_cast<std::size_t>(c)];
}

// The batch buffers' device bytes for `samples` samples (train/input/batch_buffers.hpp).
std::int64_t batch_bytes(std::int64_t samples, const DataShape& data) {
  const std::int64_t rows = data.seq_len > 0 ? data.seq_len : 1;
  return samples * 4 * (data.feature_numel + data.seq_len + rows);
}

// The stage's flat buffers, in floats: the logical (padded) size, the physical parameter and
// gradient buffers (ZeRO-2/3 fold the blocks onto two slots, zero_layout.hpp) and the largest
// unit's piece (ZeRO-2/3's receive buffers).
struct StageBuffers {
  std::int64_t logical = 0, params = 0, grads = 0, largest_piece = 0;
  std::int64_t slots = 0, slot_floats = 0;  // ZeRO-2/3's slots of the largest unit
};

// The autocast the planned job runs with. precision.kernels = native is taken as given: the
// plan may be for another machine (`trellis plan` sets it for GPU machine types), and only
// the buffers native kernels keep matter here; whether this host has such kernels is asked
// when a run resolves its own precision. auto and emulated resolve as on this host.
nn::Autocast planned_autocast(const TrainConfig& config) {
  if (config.precision.kernels == "native" && config.precision.mode != Precision::fp32) {
    nn::Autocast autocast;
    autocast.mode = config.precision.mode;
    autocast.native = true;
    return autocast;
  }
  std::string notice;
  return nn::resolve_autocast(config.precision.mode, config.precision.kernels, notice);
}

// What the stage's model, pipeline buffers and losses allocate (by category), and its buffers.
StageBuffers census_of_stage(const TrainConfig& config, const DataShape& data,
                             const PlannedGrid& grid, int stage, MemoryPlan& plan) {
  MemoryLedger census;
  const MemorySnapshot before = process_memory_ledger().snapshot();
  MemorySnapshot built;
  nn::ParameterStore store;
  store.set_autocast(planned_autocast(config), config.precision.stochastic_rounding);
  ShapeOnlyCommunicator tp_group(0, grid.tp), pp_group(stage, grid.pp);
  const nn::TensorParallel tp{grid.tp > 1 ? &tp_group : nullptr, config.parallel.sequence_parallel};
  nn::StageRange range;
  if (grid.pp > 1) {
    const std::vector<int> bounds =
        stage_boundaries(config.parallel.stages, model_unit_costs(config.model, data), grid.pp);
    range.first_unit = bounds[static_cast<std::size_t>(stage)];
    range.end_unit = bounds[static_cast<std::size_t>(stage) + 1];
  }
  const PipelineSchedule schedule =
      grid.pp > 1 ? config.parallel.schedule : PipelineSchedule::one_f_one_b;
  const int slots =
      in_flight(schedule, grid.pp, stage, static_cast<int>(config.accumulation_steps(grid.dp)));
  const nn::RecomputeSpec recompute = recompute_spec(config.memory);
  if (config.parallel.zero >= 2) store.set_unit_alignment(GradientSync::padding_multiple(grid.dp));
  {
    const nn::BufferCensus counting(census);
    std::vector<std::unique_ptr<nn::Model>> replicas;
    const std::size_t first_offset = store.registration_cursor();
    for (int k = 0; k < slots; ++k) {
      if (k > 0) store.begin_replica(first_offset);
      replicas.push_back(build_model(config.model, config.kernels, data, config.micro_batch(),
                                     store, nullptr, tp, range, recompute));
      if (k > 0) store.end_replica();
    }
    const bool vocab_parallel = replicas.front()->local_classes() < replicas.front()->classes();
    const PipelineEngine engine(std::move(replicas), schedule, grid.pp > 1 ? &pp_group : nullptr,
                                vocab_parallel ? tp : nn::TensorParallel{});
    store.pad_to_multiple(GradientSync::padding_multiple(grid.dp));
    built = process_memory_ledger().snapshot();  // the small buffers made for real
  }
  const MemorySnapshot counted = census.snapshot();
  for (int c = 0; c < kMemoryCategories; ++c)
    plan.bytes[c] +=
        counted.current[c] + std::max<std::int64_t>(0, built.current[c] - before.current[c]);
  StageBuffers buffers;
  buffers.logical = buffers.params = buffers.grads = static_cast<std::int64_t>(store.buffer_size());
  if (config.parallel.zero >= 2) {
    const ZeroLayout layout = zero_layout(store.units(), store.buffer_size());
    buffers.grads = static_cast<std::int64_t>(layout.physical_floats());
    buffers.slots = static_cast<std::int64_t>(layout.slots);
    buffers.slot_floats = static_cast<std::int64_t>(layout.slot_floats);
    if (config.parallel.zero >= 3) buffers.params = buffers.grads;
    const int shard_ranks =
        config.parallel.zero_shard_ranks > 0 ? config.parallel.zero_shard_ranks : grid.dp;
    for (const nn::UnitRange& unit : layout.units)
      buffers.largest_piece = std::max(
          buffers.largest_piece, static_cast<std::int64_t>(unit.end - unit.begin) / shard_ranks);
    if (!layout.units.empty())
      buffers.largest_piece = std::max<std::int64_t>(buffers.largest_piece, 1);
  }
  return buffers;
}

}  // namespace

std::int64_t MemoryPlan::total() const {
  return std::accumulate(bytes.begin(), bytes.end(), std::int64_t{0});
}

MemoryPlan plan_memory(const TrainConfig& config, const DataShape& data, const PlannedGrid& grid) {
  MemoryPlan best;
  for (int stage = 0; stage < std::max(grid.pp, 1); ++stage) {
    MemoryPlan plan;
    plan.stage = stage;
    const StageBuffers buffers = census_of_stage(config, data, grid, stage, plan);
    const std::int64_t P = buffers.logical;
    const int stage_of_zero = config.parallel.zero;
    // ZeRO-2/3 shard at any dp (one rank: the shard is everything); ZeRO-1 from dp 2.
    const bool zero = stage_of_zero >= 2 || (stage_of_zero == 1 && grid.dp > 1);
    const int shard_ranks = stage_of_zero >= 2 && config.parallel.zero_shard_ranks > 0
                                ? config.parallel.zero_shard_ranks
                                : grid.dp;  // hybrid sharding: one copy per group of these
    const std::int64_t shard = zero ? P / shard_ranks : P;  // the optimizer's update size
    at(plan, MemoryCategory::parameters) += 4 * buffers.params;
    if (stage_of_zero >= 3) at(plan, MemoryCategory::parameters) += 4 * shard;  // the shard's
    at(plan, MemoryCategory::gradients) += 4 * buffers.grads;
    if (zero && !grid.shared_exchange)
      at(plan, MemoryCategory::gradients) += 4 * shard;  // the reduced shard
    if (stage_of_zero >= 2)  // two receive buffers of the largest unit's piece
      at(plan, MemoryCategory::communication) += 2 * 4 * buffers.largest_piece;
    at(plan, MemoryCategory::optimizer_state) += 4 * shard * optimizer_state_buffers(config.optim);
    // A byte per element: unsharded, the decay and the norm masks; sharded, their shards and
    // the whole of one of them while it is cut (decay first, then norm).
    at(plan, MemoryCategory::other) += zero ? P + 2 * shard : 2 * P;
    if (config.precision.mode != Precision::fp32) {
      at(plan, MemoryCategory::half_copies) +=
          (planned_autocast(config).native ? 2 : 4) * buffers.params;
    }
    if (config.parallel.grad_dtype != Precision::fp32 && grid.dp > 1)
      at(plan, MemoryCategory::communication) +=
          2 * buffers.grads + (zero ? 2 * shard : 0) +
          // ZeRO-2/3: each slot's 16-bit gradients and reduced piece
          2 * buffers.slots * (buffers.slot_floats + buffers.largest_piece);
    if (stage_of_zero >= 3 && config.parallel.gather_dtype != Precision::fp32)
      at(plan, MemoryCategory::communication) +=  // each slot's 16-bit piece and gathered unit
          2 * buffers.slots *
          (std::max<std::int64_t>(buffers.largest_piece, 2) + buffers.slot_floats);
    const std::int64_t local = config.local_batch(grid.dp);
    const std::int64_t eval_rows = config.data.test.empty() ? 0 : config.train.eval_batch;
    at(plan, MemoryCategory::data) += batch_bytes(std::max(local, eval_rows), data) +
                                      config.data.prefetch * batch_bytes(local, data);
    at(plan, MemoryCategory::workspace) += kPeakGemmBytes;
    if (stage == 0 || plan.total() > best.total()) best = plan;
  }
  return best;
}

std::string describe_memory_plan(const MemoryPlan& plan) {
  std::vector<int> order(kMemoryCategories);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return plan.bytes[a] > plan.bytes[b]; });
  std::string text;
  for (int c : order) {
    if (plan.bytes[c] == 0) continue;
    text += (text.empty() ? "" : ", ") +
            std::string(memory_category_name(static_cast<MemoryCategory>(c))) + " " +
            format_bytes(static_cast<double>(plan.bytes[c]));
  }
  return text;
}

void check_memory_limit(const TrainConfig& config, const MemoryPlan& plan,
                        const PlannedGrid& grid) {
  const double limit = config.memory.limit_gb * 1024.0 * 1024.0 * 1024.0;
  if (config.memory.limit_gb <= 0 || static_cast<double>(plan.total()) <= limit) return;
  const auto bytes = [&](MemoryCategory c) { return plan.bytes[static_cast<std::size_t>(c)]; };
  const std::int64_t state = bytes(MemoryCategory::optimizer_state) +
                             bytes(MemoryCategory::gradients) + bytes(MemoryCategory::parameters);
  const std::int64_t saved = bytes(MemoryCategory::activations);
  std::vector<std::string> help;
  // Recomputation pays where saved activations are a real part of the total.
  const ModelRegistration& model = model_registration(config.model.type);
  if (saved * 10 >= plan.total() && config.memory.recompute != "full" && model.recompute_blocks)
    help.push_back("memory.recompute = " +
                   std::string(config.memory.recompute == "none" && model.recompute_selective
                                   ? "selective or "
                                   : "") +
                   "full");
  const std::string ranks = " over the " + std::to_string(grid.dp) + " data-parallel ranks)";
  if (grid.dp > 1 && config.parallel.zero < 3 && model.recompute_blocks)
    help.push_back("parallel.zero = 3 (parameters, gradients and optimizer state" + ranks);
  else if (grid.dp > 1 && config.parallel.zero < 1 && bytes(MemoryCategory::optimizer_state) > 0)
    help.push_back("parallel.zero = 1 (optimizer state" + ranks);
  if (saved + bytes(MemoryCategory::workspace) > state && config.micro_batch() > 1)
    help.push_back("a smaller train.micro_batch (now " + std::to_string(config.micro_batch()) +
                   "; activations grow with it)");
  help.push_back("parallel.tp or parallel.pp > 1 (now tp " + std::to_string(grid.tp) + ", pp " +
                 std::to_string(grid.pp) + ": the model split over more ranks)");
  std::string keys;
  for (std::size_t i = 0; i < help.size(); ++i) keys += (i == 0 ? "" : "; ") + help[i];
  throw ConfigError(
      "config key memory.limit_gb = " + format_text("%g", config.memory.limit_gb) + ": a rank" +
      (grid.pp > 1 ? " of pipeline stage " + std::to_string(plan.stage) : std::string()) +
      " needs " + format_bytes(static_cast<double>(plan.total())) + " by the memory plan (" +
      describe_memory_plan(plan) + "), more than the limit; would help: " + keys);
}

}  // namespace trellis
