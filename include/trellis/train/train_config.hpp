// Typed, validated view of a RawConfig. Every check names the key, the value it found and
// what is allowed, and runs before any data is read or any buffer is allocated.
#pragma once

#include "trellis/comm/communicator.hpp"
#include "trellis/parallel/pipeline_schedule.hpp"

#include "trellis/train/config.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace trellis {

struct ModelConfig {
  std::string type;         // "mlp" | "cnn" | "gpt"
  std::vector<int> hidden;  // mlp: widths of the hidden layers
  std::string activation;   // mlp: "relu" | "gelu"
  float dropout = 0;        // mlp, gpt
  std::string init;         // mlp: "kaiming" | "xavier"
  std::vector<int> widths;  // cnn: channels per stage
  int blocks = 1;           // cnn: residual blocks per stage
  bool sync_bn = true;      // cnn
  int n_layer = 0, n_head = 0, d_model = 0, seq_len = 0, vocab = 0;  // gpt (vocab 0: from data)
};

struct TrainLoopConfig {
  std::int64_t global_batch = 0;
  std::int64_t micro_batch = 0;  // 0 until resolve_batch() sets it from dp
  std::int64_t epochs = 0;
  std::int64_t max_steps = 0;  // 0 = unlimited
  std::uint64_t seed = 0;
  std::int64_t eval_batch = 0;
  bool eval_every_epoch = true;
  std::int64_t eval_interval = 0;     // 0 = only at epoch ends
  std::int64_t eval_max_samples = 0;  // 0 = the whole set
  double time_limit_s = 0;            // 0 = none (SLURM_JOB_END_TIME still applies)
};

struct CheckpointConfig {
  std::string dir;                  // "" in the file: <run.dir>/checkpoints
  std::int64_t interval_steps = 0;  // 0 = not by steps
  double interval_minutes = 0;      // 0 = not by time
  std::int64_t keep = 3;
  std::string resume = "none";  // none | auto | a step directory
  double margin_s = 60;         // stop this long before a time limit
};

struct MonitorConfig {
  double peak_tflops = 0;  // 0: known GPU peak or measured SGEMM
  double price_per_device_hour = 0, spot_price_per_device_hour = 0;
  double max_cost = 0, max_hours = 0;      // budgets; 0 = none
  std::string early_stop_metric = "none";  // none | test_loss | test_accuracy
  std::int64_t patience = 3;
  double min_delta = 0;
  std::string progress = "auto";  // auto | bar | lines
};

struct FaultConfig {
  double timeout_s = 0;        // watchdog; 0 = off
  bool skip_nonfinite = true;  // fault.nonfinite = skip | abort
  std::int64_t max_skips = 5;  // consecutive skipped steps before giving up
  int inject_rank = -1;        // fault.inject = rank:step:kind (testing aid)
  std::int64_t inject_step = 0;
  std::string inject_kind;  // throw | hang | nan | signal | kill_in_checkpoint
};

struct OptimConfig {
  std::string type;
  float lr = 0, momentum = 0, weight_decay = 0, beta1 = 0, beta2 = 0, eps = 0, alpha = 0;
  bool nesterov = false;
  float clip_norm = 0;
};

struct SchedConfig {
  std::string type;
  std::int64_t warmup_steps = 0, step_size = 0;
  float gamma = 0, min_lr = 0, pct_start = 0, div_factor = 0, final_div_factor = 0;
};

struct DataConfig {
  std::string train, test;
  bool shuffle = true;
  std::string remainder;  // "partial" | "drop"
  bool cache_in_memory = false;
};

struct ParallelConfig {
  int tp = 1, pp = 1;
  CommBackend backend = CommBackend::mpi;
  double bucket_mb = 25;
  bool overlap = true;
  bool zero = false;  // ZeRO-1
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  std::string stages;  // parallel.stages: units per stage, or empty (balanced)
};

struct TrainConfig {
  RawConfig raw;
  ModelConfig model;
  TrainLoopConfig train;
  OptimConfig optim;
  SchedConfig sched;
  DataConfig data;
  ParallelConfig parallel;
  CheckpointConfig ckpt;
  FaultConfig fault;
  MonitorConfig monitor;
  std::string run_dir;
  std::int64_t log_interval = 0;

  static TrainConfig from(const RawConfig& raw);

  // Checks the batch arithmetic against the data-parallel size and fills in the micro-batch:
  // global_batch must be a multiple of dp * micro_batch.
  void resolve_batch(int dp);
  std::int64_t local_batch(int dp) const { return train.global_batch / dp; }
  std::int64_t accumulation_steps(int dp) const { return local_batch(dp) / train.micro_batch; }
};

// Typed accessors, public for tests: each throws ConfigError naming the key.
std::int64_t config_int(const RawConfig& raw, const std::string& key, std::int64_t min_value);
double config_double(const RawConfig& raw, const std::string& key, double min_value,
                     double max_value);
bool config_bool(const RawConfig& raw, const std::string& key);
std::string config_choice(const RawConfig& raw, const std::string& key,
                          const std::vector<std::string>& allowed);
std::vector<int> config_int_list(const RawConfig& raw, const std::string& key, int min_value);

}  // namespace trellis
