// Typed, validated configuration. Each key is declared once, in the config table
// (config_table.hpp), which binds it to its field below with its default, range or choices
// and help text; parsing, validation, `trellis train --help` and config.ini all come from it.
// Every check names the key, the value it found and what is allowed, and runs before any
// data is read or any buffer is allocated.
//
// The section structs hold what the user asked for; values resolved later (the micro-batch
// from dp, the vocabulary from the data, the checkpoint directory, the communicator) live
// apart in DerivedConfig.
#pragma once

#include "trellis/comm/communicator.hpp"
#include "trellis/core/precision.hpp"
#include "trellis/optim/loss_scaler.hpp"
#include "trellis/optim/optimizer.hpp"
#include "trellis/optim/schedule.hpp"
#include "trellis/parallel/pipeline_schedule.hpp"

#include "trellis/train/config/raw_config.hpp"
#include "trellis/train/model/model_config.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace trellis {

struct TrainLoopConfig {
  std::int64_t global_batch = 0;
  std::int64_t micro_batch = 0;  // as given: 0 = global_batch / dp (see DerivedConfig)
  std::int64_t epochs = 0;
  std::int64_t max_steps = 0;  // 0 = unlimited
  std::uint64_t seed = 0;
  std::int64_t eval_batch = 0;
  bool eval_every_epoch = false;
  std::int64_t eval_interval = 0;     // 0 = only at epoch ends
  std::int64_t eval_max_samples = 0;  // 0 = the whole set
  double time_limit_s = 0;            // 0 = none (SLURM_JOB_END_TIME still applies)
};

struct CheckpointConfig {
  std::string dir;  // as given: "" = <run.dir>/checkpoints (DerivedConfig::checkpoint_dir)
  std::int64_t interval_steps = 0;  // 0 = not by steps
  double interval_minutes = 0;      // 0 = not by time
  std::int64_t keep = 0;
  std::string resume;   // none | auto | a step directory
  double margin_s = 0;  // stop this long before a time limit
};

// init.*: where a new run's parameters come from (fine-tuning).
struct InitConfig {
  std::string weights;  // a weights file to start from; "" = fresh initialisation
};

// monitor.*: the device peak MFU is measured against.
struct MonitorConfig {
  double peak_tflops = 0;   // 0: known GPU peak or measured SGEMM
  std::string trace;        // Chrome trace / Perfetto JSON file or directory; "" = none
  std::string trace_steps;  // "first:last" optimizer steps to record
};

// cost.*: what a device-hour costs, for the cost figures.
struct CostConfig {
  double price_per_device_hour = 0, spot_price_per_device_hour = 0;
};

// budget.*: stop (with a checkpoint) when the run has cost or taken this much; 0 = none.
struct BudgetConfig {
  double max_cost = 0, max_hours = 0;
};

// early_stop.*: stop when an evaluation metric stops improving.
struct EarlyStopConfig {
  std::string metric;  // none | test_loss | test_accuracy
  std::int64_t patience = 0;
  double min_delta = 0;
};

// log.*: the console and metrics.jsonl.
struct LogConfig {
  std::string progress;       // auto | bar | lines
  std::int64_t interval = 0;  // a report every this many optimizer steps
};

// fault.inject's kinds of failure (a testing aid, train/faults/fault_injector.hpp).
enum class FaultKind {
  none,
  throw_error,          // "throw": an exception on that rank before the step
  hang,                 // the rank stops making progress (the watchdog's case)
  nan,                  // the step's loss becomes non-finite
  signal,               // SIGUSR1, as a scheduler's warning
  kill_in_checkpoint,   // SIGKILL during a checkpoint write
  freeze_in_checkpoint  // SIGSTOP after the first tensor of a checkpoint
};
// The names, the one list (the config table, its messages and the injector read it).
const std::vector<std::pair<const char*, FaultKind>>& fault_kind_names();
const char* fault_kind_name(FaultKind kind);

struct FaultConfig {
  double timeout_s = 0;         // watchdog; 0 = off
  bool skip_nonfinite = false;  // fault.nonfinite = skip | abort
  std::int64_t max_skips = 0;   // consecutive skipped steps before giving up
  int inject_rank = -1;         // fault.inject = rank:step:kind (testing aid); -1 = none
  std::int64_t inject_step = 0;
  FaultKind inject_kind = FaultKind::none;
};

// prune.*: gradual magnitude pruning during training (train/pruner.hpp).
struct PruneConfig {
  std::string method;  // none | magnitude
  std::string scope;   // layer (a threshold per tensor) | global (one over all targets)
  double initial_sparsity = 0, final_sparsity = 0;
  std::int64_t start_step = 0;
  std::int64_t end_step = 0;  // 0 = the run's last step
  std::int64_t frequency = 0;
};

// optim.*: the optimizer's own hyperparameters plus the two the trainer applies.
struct OptimConfig : OptimizerSpec {
  float lr = 0;
  float clip_norm = 0;  // 0 = off
};

// sched.*: the schedule's spec; base_lr and total_steps are filled by schedule_spec().
using SchedConfig = ScheduleSpec;

struct DataConfig {
  std::string train, test;
  bool shuffle = false;
  std::string remainder;  // "partial" | "drop"
  std::string stage;      // node-local directory to copy the data into; "" = read in place
  bool cache_in_memory = false;
  int prefetch = 0;            // batches read ahead on the loader thread; 0 = synchronous
  std::string augment;         // "none" or e.g. "crop,flip" (training images only)
  int augment_pad = 0;         // crop: largest shift in pixels
  double augment_scale = 0;    // scale: largest relative zoom
  double augment_degrees = 0;  // rotate: largest angle either way
};

struct ParallelConfig {
  int tp = 0, pp = 0;
  std::string backend;  // as given: auto | mpi | nccl (DerivedConfig::backend is the resolved)
  double bucket_mb = 0;
  bool overlap = false;
  std::string grad_exchange;  // auto | communicator | shared_memory (TrainingModel resolves)
  int zero = 0;               // ZeRO stage: 0, 1 (optimizer state), 2 (+ grads), 3 (+ params)
  int zero_shard_ranks = 0;   // ZeRO-2/3 shard groups: 0 = the dp group, N = hybrid (HSDP)
  bool sequence_parallel = false;  // Megatron-SP in the transformer blocks when tp > 1
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  std::string stages;                      // parallel.stages: units per stage, or empty (balanced)
  Precision grad_dtype = Precision::fp32;  // the data-parallel gradient wire format
  Precision gather_dtype = Precision::fp32;  // ZeRO-3's parameter gather format
  int powersgd_rank = 0;                   // 0 = off
  std::int64_t powersgd_start_step = 0;
  double powersgd_min_compression = 0;
};

// Mixed precision: fp32 master weights and optimizer state, GEMM operands in `mode`.
struct PrecisionConfig {
  Precision mode = Precision::fp32;
  std::string kernels;  // auto | native | emulated (nn/autocast.hpp resolves)
  bool stochastic_rounding = false;
  std::string loss_scale;  // auto | dynamic | none | a positive number (static)
  double initial_scale = 0, growth_factor = 0, backoff_factor = 0, min_scale = 0;
  std::int64_t growth_interval = 0, hysteresis = 0;

  // The scaler precision.* asks for: auto = dynamic for fp16, none otherwise.
  LossScaleSpec loss_scale_spec() const;
};

// Resolved from the user's values and the run's circumstances; never parsed from the user.
// config.ini records micro_batch and vocab in place of train.micro_batch and model.vocab.
struct DerivedConfig {
  std::int64_t micro_batch = 0;  // resolve_batch(): samples per forward/backward on one rank
  int vocab = 0;                 // resolve_vocab(): gpt's vocabulary; 0 until resolved
  std::string checkpoint_dir;    // ckpt.dir, or <run.dir>/checkpoints
  CommBackend backend = CommBackend::mpi;  // parallel.backend with auto resolved for this build
};

struct TrainConfig {
  ModelConfig model;
  TrainLoopConfig train;
  OptimConfig optim;
  SchedConfig sched;
  DataConfig data;
  ParallelConfig parallel;
  PrecisionConfig precision;
  CheckpointConfig ckpt;
  InitConfig init;
  FaultConfig fault;
  MonitorConfig monitor;
  CostConfig cost;
  BudgetConfig budget;
  EarlyStopConfig early_stop;
  LogConfig log;
  KernelsConfig kernels;
  MemoryConfig memory;
  PruneConfig prune;
  std::string run_dir;
  bool run_overwrite = false;               // run.overwrite
  bool stretch_schedule_on_resume = false;  // sched.stretch_on_resume
  DerivedConfig derived;
  std::string source;  // where the values came from, for config.ini's header

  // Parses and validates every key of `raw`; throws ConfigError naming the key.
  static TrainConfig from(const RawConfig& raw);

  // Checks the batch arithmetic against the data-parallel size and resolves the micro-batch
  // (derived.micro_batch): global_batch must be a multiple of dp * micro_batch.
  void resolve_batch(int dp);
  std::int64_t micro_batch() const { return derived.micro_batch; }  // after resolve_batch
  std::int64_t local_batch(int dp) const { return train.global_batch / dp; }
  std::int64_t accumulation_steps(int dp) const { return local_batch(dp) / micro_batch(); }
  // The gpt's vocabulary: model.vocab, or the data's when 0 (derived.vocab); ConfigError when
  // model.vocab is smaller than the data's.
  void resolve_vocab(int vocab_from_data);
  // Checks what needs the number of ranks (fault.inject's rank); ConfigError naming the key.
  void check_against_world(int world_size) const;

  const OptimizerSpec& optimizer_spec() const { return optim; }
  ScheduleSpec schedule_spec(std::int64_t total_steps) const;

  // Valid settings worth a word on rank 0 (e.g. a time limit shorter than ckpt.margin_s).
  std::vector<std::string> warnings() const;

  // The resolved configuration as INI text, every key, derived values in their keys' place.
  std::string to_ini() const;
};

// Checkpoint compatibility: the first model-defining key (model.*, train.global_batch,
// train.seed, optim.type) whose typed values differ, or an empty key when all agree. Values
// are compared as parsed ("256, 128" equals "256,128"); model.vocab as resolved when it is.
struct ConfigDifference {
  std::string key;  // "" = none
  std::string stored_value, current_value;
};
ConfigDifference first_model_difference(const TrainConfig& stored, const TrainConfig& current);

}  // namespace trellis
