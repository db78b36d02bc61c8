#include "trellis/train/config/train_config.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/format.hpp"
#include "trellis/core/name_table.hpp"
#include "trellis/train/config/config_fields.hpp"
#include "trellis/train/config/config_table.hpp"
#include "trellis/train/model/model_registry.hpp"

#include <algorithm>
#include <climits>
#include <sstream>

namespace trellis {

namespace {

[[noreturn]] void fail(const std::string& message) { throw ConfigError(printable(message)); }

// ZeRO-2/3 reduce and gather per block, through the communicator, in fp32.
void check_zero_sharding(const TrainConfig& c, const ModelRegistration& model) {
  const std::string zero = "config keys parallel.zero = " + std::to_string(c.parallel.zero);
  if (!model.recompute_blocks)
    fail(zero + " and model.type = " + model.name +
         ": ZeRO-2/3 shard by block, and this model has none; use parallel.zero = 1");
  if (c.parallel.grad_exchange == "shared_memory")
    fail(zero +
         " and parallel.grad_exchange = shared_memory: ZeRO-2/3 reduce-scatter each "
         "block through the communicator; use parallel.grad_exchange = communicator or auto");
  if (c.parallel.powersgd_rank > 0)
    fail(zero + " and parallel.powersgd_rank = " + std::to_string(c.parallel.powersgd_rank) +
         ": ZeRO-2/3 reduce-scatter each block's gradients, PowerSGD compresses the whole "
         "buffer at once; use parallel.zero = 1 with PowerSGD");
}

// Rules that involve more than one key; each names every key it involves.
void check_combinations(const TrainConfig& c) {
  const ModelRegistration& model = model_registration(c.model.type);
  model.validate(c.model);  // the model's own shape rules, before any data is read
  if (c.optim.nesterov && (c.optim.type != OptimizerType::sgd || c.optim.momentum <= 0))
    fail("config key optim.nesterov = true needs optim.type = sgd and optim.momentum > 0");
  if (c.budget.max_cost > 0 && c.cost.price_per_device_hour <= 0)
    fail("config key budget.max_cost needs cost.price_per_device_hour > 0");
  if (c.early_stop.metric != "none" && c.data.test.empty())
    fail("config key early_stop.metric = " + c.early_stop.metric +
         " needs data.test (the metric is measured on it)");
  if (c.prune.final_sparsity < c.prune.initial_sparsity)
    fail("config keys prune.initial_sparsity = " + format_text("%g", c.prune.initial_sparsity) +
         " and prune.final_sparsity = " + format_text("%g", c.prune.final_sparsity) +
         ": the final sparsity must be at least the initial one (masks only grow)");
  if (c.prune.method == "structured" && c.prune.scope != "layer")
    fail("config keys prune.method = structured and prune.scope = " + c.prune.scope +
         ": structured pruning ranks each layer's units by their own norms; use "
         "prune.scope = layer");
  if (c.prune.method == "structured" && !model.set_pruned_widths)
    fail("config keys prune.method = structured and model.type = " + std::string(model.name) +
         ": structured pruning removes MLP neurons and CNN block channels; use "
         "prune.method = magnitude for this model");
  if (c.prune.end_step != 0 && c.prune.end_step < c.prune.start_step)
    fail("config keys prune.start_step = " + std::to_string(c.prune.start_step) +
         " and prune.end_step = " + std::to_string(c.prune.end_step) +
         ": end_step must be 0 (the run's end) or >= start_step");
  if (c.memory.recompute != "none" && !model.recompute_blocks)
    fail("config keys memory.recompute = " + c.memory.recompute +
         " and model.type = " + model.name + ": this model has no blocks to recompute; use " +
         "memory.recompute = none for this model");
  if (c.parallel.zero >= 2) check_zero_sharding(c, model);
  if (c.parallel.sequence_parallel && !model.recompute_selective)
    fail("config keys parallel.sequence_parallel = true and model.type = " +
         std::string(model.name) +
         ": sequence parallelism splits transformer blocks (gpt, "
         "llama); use parallel.sequence_parallel = false");
  if (c.parallel.sequence_parallel && c.parallel.tp > 1 && c.model.seq_len % c.parallel.tp != 0)
    fail("config keys parallel.sequence_parallel = true, model.seq_len = " +
         std::to_string(c.model.seq_len) + " and parallel.tp = " + std::to_string(c.parallel.tp) +
         ": each tp rank takes seq_len / tp token rows of every sequence; make seq_len a "
         "multiple of tp");
  if (c.parallel.zero_shard_ranks > 0 && c.parallel.zero < 2)
    fail("config key parallel.zero_shard_ranks = " + std::to_string(c.parallel.zero_shard_ranks) +
         " needs parallel.zero = 2 or 3 (it says over which ranks their shards split)");
  if (c.parallel.gather_dtype != Precision::fp32 && c.parallel.zero != 3)
    fail("config key parallel.zero_gather_dtype = " +
         std::string(precision_name(c.parallel.gather_dtype)) + " needs parallel.zero = 3 (only " +
         "ZeRO-3 gathers parameters); now parallel.zero = " + std::to_string(c.parallel.zero));
  if (c.parallel.pp == 1 && !c.parallel.stages.empty())
    fail("config key parallel.stages = '" + c.parallel.stages +
         "' needs parallel.pp > 1 (it splits the model into pipeline stages); with "
         "parallel.pp = 1 leave it empty");
}

}  // namespace

TrainConfig TrainConfig::from(const RawConfig& raw) {
  TrainConfig c;
  c.source = raw.source();
  for (const ConfigEntry& entry : config_table()) entry.parse(c, raw.get(entry.name));
  check_combinations(c);
  c.derived.checkpoint_dir = c.ckpt.dir.empty() ? c.run_dir + "/checkpoints" : c.ckpt.dir;
  c.derived.backend = parse_comm_backend(c.parallel.backend);  // nccl in a build without it
  c.derived.vocab = c.model.vocab;
  return c;
}

void TrainConfig::resolve_batch(int dp) {
  const std::int64_t global = train.global_batch;
  if (dp < 1 || global % dp != 0)
    fail("config key train.global_batch = " + std::to_string(global) + " is not divisible by the " +
         std::to_string(dp) + " data-parallel ranks; use a multiple of " + std::to_string(dp));
  const std::int64_t local = global / dp;
  const std::int64_t micro = train.micro_batch == 0 ? local : train.micro_batch;
  if (local % micro != 0)
    fail("config keys train.global_batch = " + std::to_string(global) +
         " and train.micro_batch = " + std::to_string(micro) +
         ": global_batch must be a multiple of dp x micro_batch = " + std::to_string(dp) + " x " +
         std::to_string(micro));
  // One forward/backward takes an int row count.
  if (micro > INT_MAX)
    fail("config key train.global_batch = " + std::to_string(global) + ": " +
         std::to_string(micro) + " samples per rank and micro-batch exceed " +
         std::to_string(INT_MAX) + "; set train.micro_batch");
  derived.micro_batch = micro;
}

void TrainConfig::resolve_vocab(int vocab_from_data) {
  if (model.vocab == 0) {
    derived.vocab = vocab_from_data;
    return;
  }
  if (model.vocab < vocab_from_data)
    fail("config key model.vocab = " + std::to_string(model.vocab) +
         " is smaller than the data's vocab_size " + std::to_string(vocab_from_data));
  derived.vocab = model.vocab;
}

void TrainConfig::check_against_world(int world_size) const {
  if (fault.inject_rank >= world_size)
    fail("config key fault.inject = '" + find_config_entry("fault.inject")->format(*this) +
         "': rank " + std::to_string(fault.inject_rank) + " is outside the job's " +
         std::to_string(world_size) + " ranks (0.." + std::to_string(world_size - 1) + ")");
}

ScheduleSpec TrainConfig::schedule_spec(std::int64_t total_steps) const {
  ScheduleSpec spec = sched;
  spec.base_lr = optim.lr;
  spec.total_steps = total_steps;
  return spec;
}

std::vector<std::string> TrainConfig::warnings() const {
  std::vector<std::string> out;
  if (train.time_limit_s > 0 && train.time_limit_s <= ckpt.margin_s)
    out.push_back(
        "train.time_limit = " + config_text::format_real(train.time_limit_s, false) +
        " s is not more than ckpt.margin_s = " + config_text::format_real(ckpt.margin_s, false) +
        " s: the run will checkpoint and stop after its first step; lower "
        "ckpt.margin_s or raise train.time_limit");
  return out;
}

std::string TrainConfig::to_ini() const {
  std::ostringstream out;
  out << "# Resolved Trellis configuration (source: " << source << ")\n";
  std::string section, value;
  for (const ConfigEntry& entry : config_table()) {
    const std::string name = entry.name;
    const auto dot = name.find('.');
    const std::string this_section = name.substr(0, dot);
    if (this_section != section) {
      out << (section.empty() ? "" : "\n") << '[' << this_section << "]\n";
      section = this_section;
    }
    // Derived values stand in for the keys they resolve, so that the file rebuilds the model.
    if (name == "train.micro_batch" && derived.micro_batch > 0)
      value = std::to_string(derived.micro_batch);
    else if (name == "model.vocab" && derived.vocab > 0)
      value = std::to_string(derived.vocab);
    else
      value = entry.format(*this);
    out << name.substr(dot + 1) << " = " << value << '\n';
  }
  return out.str();
}

ConfigDifference first_model_difference(const TrainConfig& stored, const TrainConfig& current) {
  for (const ConfigEntry& entry : config_table()) {
    const std::string name = entry.name;
    if (name.rfind("model.", 0) != 0 && name != "train.global_batch" && name != "train.seed" &&
        name != "optim.type")
      continue;
    std::string a = entry.format(stored), b = entry.format(current);
    if (name == "model.vocab")
      a = std::to_string(stored.derived.vocab), b = std::to_string(current.derived.vocab);
    if (a != b) return {name, a, b};
  }
  return {};
}

}  // namespace trellis

namespace trellis {

LossScaleSpec PrecisionConfig::loss_scale_spec() const {
  LossScaleSpec spec;
  const bool automatic = loss_scale == "auto";
  spec.enabled = loss_scale != "none" && (!automatic || mode == Precision::fp16);
  spec.dynamic = automatic || loss_scale == "dynamic";
  spec.initial_scale = spec.dynamic ? static_cast<float>(initial_scale) : std::stof(loss_scale);
  spec.growth_factor = static_cast<float>(growth_factor);
  spec.backoff_factor = static_cast<float>(backoff_factor);
  spec.growth_interval = growth_interval;
  spec.hysteresis = hysteresis;
  // A static scale never backs off, so its floor is itself.
  spec.min_scale = spec.dynamic ? static_cast<float>(min_scale) : spec.initial_scale;
  return spec;
}

const std::vector<std::pair<const char*, FaultKind>>& fault_kind_names() {
  static const std::vector<std::pair<const char*, FaultKind>> names = {
      {"throw", FaultKind::throw_error},
      {"hang", FaultKind::hang},
      {"nan", FaultKind::nan},
      {"signal", FaultKind::signal},
      {"kill_in_checkpoint", FaultKind::kill_in_checkpoint},
      {"freeze_in_checkpoint", FaultKind::freeze_in_checkpoint}};
  return names;
}

const char* fault_kind_name(FaultKind kind) { return name_in(fault_kind_names(), kind); }

}  // namespace trellis
