#include "trellis/train/config.hpp"

#include "trellis/core/error.hpp"

#include <boost/program_options.hpp>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

namespace po = boost::program_options;

namespace trellis {

const std::vector<ConfigKey>& config_schema() {
  static const std::vector<ConfigKey> schema = {
      {"model.type", "mlp", "network family: mlp | cnn | gpt"},
      {"model.hidden", "256,128", "hidden layer widths of the MLP, comma-separated"},
      {"model.activation", "relu", "activation: relu | gelu"},
      {"model.dropout", "0",
       "dropout probability in [0, 1): mlp after each hidden activation, gpt on "
       "embeddings, attention weights and residual branches"},
      {"model.init", "kaiming", "weight initialisation of the MLP: kaiming | xavier"},
      {"model.widths", "32,64,128",
       "cnn: channels of each stage (stages after the first halve H and W)"},
      {"model.blocks", "1", "cnn: residual blocks per stage"},
      {"model.sync_bn", "true", "cnn: BatchNorm statistics over all data-parallel ranks"},
      {"model.n_layer", "4", "gpt: transformer blocks"},
      {"model.n_head", "4", "gpt: attention heads (divides model.d_model)"},
      {"model.d_model", "128", "gpt: embedding width"},
      {"model.seq_len", "128", "gpt: context length in tokens"},
      {"model.vocab", "0", "gpt: vocabulary size; 0 = the training set's vocab_size"},
      {"train.global_batch", "128", "samples per optimizer step over all data-parallel ranks"},
      {"train.micro_batch", "0",
       "samples per forward/backward on one rank; 0 = global_batch / dp "
       "(gradients accumulate over global_batch / (dp * micro_batch))"},
      {"train.epochs", "1", "passes over the training set"},
      {"train.max_steps", "0", "stop after this many optimizer steps; 0 = no limit"},
      {"train.seed", "1234", "seed of initialisation, shuffling and dropout"},
      {"train.eval_batch", "1000", "samples per evaluation batch on one rank"},
      {"train.eval_every_epoch", "true", "evaluate on data.test after every epoch"},
      {"train.eval_interval", "0", "also evaluate every this many steps; 0 = only at epoch ends"},
      {"train.time_limit", "0",
       "seconds of wall time for this run (checkpoint and stop before); 0 = none"},
      {"train.eval_max_samples", "0",
       "evaluate on at most this many samples of data.test; 0 = all"},
      {"optim.type", "sgd", "optimizer: sgd | adam | adamw | rmsprop"},
      {"optim.lr", "0.05", "base learning rate"},
      {"optim.momentum", "0.9", "momentum (sgd, rmsprop)"},
      {"optim.nesterov", "false", "Nesterov momentum (sgd)"},
      {"optim.weight_decay", "0", "weight decay (L2 for sgd/adam/rmsprop, decoupled for adamw)"},
      {"optim.beta1", "0.9", "Adam beta1"},
      {"optim.beta2", "0.999", "Adam beta2"},
      {"optim.eps", "1e-8", "Adam / RMSProp epsilon"},
      {"optim.alpha", "0.99", "RMSProp smoothing constant"},
      {"optim.clip_norm", "0", "clip the global gradient norm to this value; 0 = off"},
      {"sched.type", "constant", "learning-rate schedule: constant | step | cosine | onecycle"},
      {"sched.warmup_steps", "0", "linear warm-up steps (constant, step, cosine)"},
      {"sched.step_size", "1000", "steps between decays (step)"},
      {"sched.gamma", "0.1", "decay factor (step)"},
      {"sched.min_lr", "0", "final learning rate (cosine)"},
      {"sched.pct_start", "0.3", "fraction of steps spent rising (onecycle)"},
      {"sched.div_factor", "25", "initial lr = lr / div_factor (onecycle)"},
      {"sched.final_div_factor", "10000", "final lr = initial lr / final_div_factor (onecycle)"},
      {"data.train", "", "training set: an HDF5 file or a glob of shard files"},
      {"data.test", "",
       "test (or validation) set: an HDF5 file or a glob of shard files (optional)"},
      {"data.shuffle", "true", "reshuffle the training set every epoch"},
      {"data.remainder", "partial", "last incomplete global batch: partial (use it) | drop"},
      {"data.stage", "",
       "node-local directory (e.g. $TMPDIR or an NVMe mount) to copy the data files into, once "
       "per node, before training; empty: read in place"},
      {"data.cache", "none",
       "none: read every batch from HDF5 | memory: load the whole dataset "
       "into each rank's memory once (small datasets)"},
      {"parallel.tp", "1",
       "tensor-parallel ranks per model replica (consecutive ranks: keep them on one node); "
       "mlp and gpt"},
      {"parallel.pp", "1", "pipeline-parallel stages (mlp and gpt)"},
      {"parallel.schedule", "1f1b",
       "pipeline schedule: 1f1b (at most pp - stage micro-batches in flight) | gpipe (all "
       "forwards, then all backwards)"},
      {"parallel.stages", "",
       "units per pipeline stage, e.g. 2,1,1 (mlp: one per Linear; gpt: embeddings, each "
       "block, head); empty: balanced by cost"},
      {"parallel.backend", "auto", "communicator for the model's tensors: auto | mpi | nccl"},
      {"parallel.bucket_mb", "25", "gradient all-reduce bucket size in MiB"},
      {"parallel.overlap", "true",
       "start each gradient bucket's all-reduce as soon as backward has filled it"},
      {"parallel.zero", "0",
       "1: ZeRO-1, optimizer state sharded over the data-parallel ranks (reduce-scatter "
       "gradients, update the own shard, all-gather parameters)"},
      {"run.dir", "runs/default", "directory for config.ini, metrics.jsonl and model.h5"},
      {"ckpt.dir", "", "checkpoint directory; empty: <run.dir>/checkpoints"},
      {"ckpt.interval_steps", "0", "write a checkpoint every this many steps; 0 = not by steps"},
      {"ckpt.interval_minutes", "0", "write a checkpoint every this many minutes; 0 = not by time"},
      {"ckpt.keep", "3", "checkpoints kept (older ones are removed); 0 = all"},
      {"ckpt.resume", "none",
       "none | auto (the newest valid checkpoint in ckpt.dir, if any) | a step directory; "
       "also --resume"},
      {"ckpt.margin_s", "60",
       "stop and checkpoint this many seconds (plus one step) before train.time_limit or "
       "SLURM_JOB_END_TIME"},
      {"monitor.peak_tflops", "0",
       "peak TFLOP/s of one device for MFU; 0: the data-sheet peak of a known GPU, or an SGEMM "
       "measured at start-up on CPUs"},
      {"cost.price_per_device_hour", "0", "on-demand price of one device (GPU) for one hour"},
      {"cost.spot_price_per_device_hour", "0", "spot/preemptible price of one device-hour"},
      {"budget.max_cost", "0",
       "stop (with a checkpoint) when the on-demand cost so far reaches this; 0 = no budget"},
      {"budget.max_hours", "0",
       "stop (with a checkpoint) after this many hours of wall time; 0 = no budget"},
      {"early_stop.metric", "none",
       "stop (with a checkpoint) when this evaluation metric stops improving: none | test_loss "
       "| test_accuracy"},
      {"early_stop.patience", "3", "evaluations without improvement before stopping"},
      {"early_stop.min_delta", "0", "smallest change that counts as an improvement"},
      {"log.progress", "auto",
       "auto (a bar when stdout is a terminal and no MPI launcher started the process: "
       "mpirun's ranks always see a terminal) | bar | lines"},
      {"fault.timeout_s", "0",
       "watchdog: abort the job when a rank makes no progress for this long; 0 = off"},
      {"fault.nonfinite", "skip",
       "non-finite loss or gradients: skip (the step, with a warning) | abort"},
      {"fault.max_skips", "5", "abort after this many consecutive skipped steps"},
      {"fault.inject", "",
       "testing aid: rank:step:kind, kind throw | hang | nan | signal (SIGUSR1 to itself) | "
       "kill_in_checkpoint (SIGKILL during the checkpoint after that step)"},
      {"log.interval", "50", "log every this many optimizer steps"},
  };
  return schema;
}

namespace {

const ConfigKey* find_key(const std::string& name) {
  for (const auto& key : config_schema())
    if (name == key.name) return &key;
  return nullptr;
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

std::string section_keys(const std::string& key) {
  const std::string section = key.substr(0, key.find('.'));
  std::string list;
  for (const auto& k : config_schema()) {
    const std::string name = k.name;
    if (name.compare(0, section.size() + 1, section + ".") == 0)
      list += (list.empty() ? "" : ", ") + name;
  }
  return list;
}

void reject_unknown(const std::string& key, const std::string& where) {
  std::string message = "unknown config key '" + key + "' in " + where + "; did you mean '" +
                        closest_config_key(key) + "'?";
  const std::string same_section = section_keys(key);
  if (!same_section.empty()) message += " Keys of this section: " + same_section;
  message += " (see `trellis train --help` for all keys)";
  throw ConfigError(message);
}

}  // namespace

std::string closest_config_key(const std::string& key) {
  const ConfigKey* best = nullptr;
  std::size_t best_distance = ~std::size_t{0};
  for (const auto& candidate : config_schema()) {
    const std::size_t d = edit_distance(key, candidate.name);
    if (d < best_distance) best_distance = d, best = &candidate;
  }
  return best ? best->name : "";
}

RawConfig RawConfig::parse(const std::string& config_file,
                           const std::vector<std::string>& overrides) {
  if (config_file.empty()) return parse_stream(nullptr, "", overrides);
  std::ifstream in(config_file);
  if (!in) throw ConfigError("cannot open config file '" + config_file + "'");
  return parse_stream(&in, "config file '" + config_file + "'", overrides);
}

RawConfig RawConfig::parse_text(const std::string& ini_text, const std::string& source,
                                const std::vector<std::string>& overrides) {
  std::istringstream in(ini_text);
  return parse_stream(&in, source, overrides);
}

RawConfig RawConfig::parse_stream(std::istream* ini, const std::string& source,
                                  const std::vector<std::string>& overrides) {
  RawConfig config;
  for (const auto& key : config_schema()) {
    config.values_[key.name] = key.default_value;
    config.explicit_[key.name] = false;
  }
  config.source_ = ini ? source : "(defaults)";

  // Overrides are "--section.key=value" (an empty value is allowed: --data.test= clears it).
  // A key given twice takes the later value, so wrapper scripts can append overrides.
  std::set<std::string> seen;
  for (const auto& arg : overrides) {
    const auto equals = arg.find('=');
    if (arg.rfind("--", 0) != 0 || equals == std::string::npos)
      throw ConfigError("unexpected argument '" + arg + "': overrides are --section.key=value");
    const std::string key = arg.substr(2, equals - 2);
    if (!find_key(key)) reject_unknown(key, "the command line");
    seen.insert(key);
    config.values_[key] = arg.substr(equals + 1);
    config.explicit_[key] = true;
  }
  try {
    po::options_description none;
    if (ini) {
      auto from_file = po::parse_config_file(*ini, none, /*allow_unregistered=*/true);
      std::set<std::string> in_file;
      for (const auto& option : from_file.options) {
        const std::string& key = option.string_key;
        if (!find_key(key)) reject_unknown(key, source);
        if (!in_file.insert(key).second)
          throw ConfigError("config key '" + key + "' appears twice in " + source);
        if (seen.count(key)) continue;  // the command line wins
        config.values_[key] = option.value.empty() ? "" : option.value[0];
        config.explicit_[key] = true;
      }
    }
  } catch (const po::error& e) {
    throw ConfigError(std::string("cannot parse configuration (") + config.source_ +
                      "): " + e.what());
  }
  return config;
}

const std::string& RawConfig::get(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end()) throw Error("internal: config key '" + key + "' is not in the schema");
  return it->second;
}

bool RawConfig::is_default(const std::string& key) const {
  auto it = explicit_.find(key);
  return it == explicit_.end() || !it->second;
}

void RawConfig::set(const std::string& key, const std::string& value) {
  if (!find_key(key)) reject_unknown(key, "RawConfig::set");
  values_[key] = value;
  explicit_[key] = true;
}

std::string RawConfig::to_ini() const {
  std::ostringstream out;
  out << "# Resolved Trellis configuration (source: " << source_ << ")\n";
  std::string section;
  for (const auto& key : config_schema()) {
    const std::string name = key.name;
    const auto dot = name.find('.');
    const std::string this_section = name.substr(0, dot);
    if (this_section != section) {
      out << (section.empty() ? "" : "\n") << '[' << this_section << "]\n";
      section = this_section;
    }
    out << name.substr(dot + 1) << " = " << get(name) << '\n';
  }
  return out.str();
}

}  // namespace trellis
