#include "trellis/train/train_config.hpp"

#include "trellis/core/error.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace trellis {

namespace {

[[noreturn]] void bad_value(const std::string& key, const std::string& value,
                            const std::string& expected) {
  throw ConfigError("config key " + key + " = '" + value + "': expected " + expected);
}

std::string join(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

}  // namespace

std::int64_t config_int(const RawConfig& raw, const std::string& key, std::int64_t min_value) {
  const std::string& text = raw.get(key);
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  const std::string expected = "an integer >= " + std::to_string(min_value);
  if (text.empty() || *end != '\0' || errno == ERANGE) bad_value(key, text, expected);
  if (value < min_value) bad_value(key, text, expected);
  return value;
}

double config_double(const RawConfig& raw, const std::string& key, double min_value,
                     double max_value) {
  const std::string& text = raw.get(key);
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  std::ostringstream expected;
  expected << "a number in [" << min_value << ", " << max_value << "]";
  if (text.empty() || *end != '\0' || !std::isfinite(value)) bad_value(key, text, expected.str());
  if (value < min_value || value > max_value) bad_value(key, text, expected.str());
  return value;
}

bool config_bool(const RawConfig& raw, const std::string& key) {
  const std::string& text = raw.get(key);
  if (text == "true" || text == "1" || text == "yes" || text == "on") return true;
  if (text == "false" || text == "0" || text == "no" || text == "off") return false;
  bad_value(key, text, "true or false");
}

std::string config_choice(const RawConfig& raw, const std::string& key,
                          const std::vector<std::string>& allowed) {
  const std::string& text = raw.get(key);
  for (const auto& choice : allowed)
    if (text == choice) return text;
  bad_value(key, text, "one of: " + join(allowed, ", "));
}

std::vector<int> config_int_list(const RawConfig& raw, const std::string& key, int min_value) {
  const std::string& text = raw.get(key);
  std::vector<int> values;
  std::stringstream in(text);
  std::string item;
  const std::string expected = "a comma-separated list of integers >= " + std::to_string(min_value);
  while (std::getline(in, item, ',')) {
    const auto first = item.find_first_not_of(" \t");
    const auto last = item.find_last_not_of(" \t");
    if (first == std::string::npos) bad_value(key, text, expected);
    item = item.substr(first, last - first + 1);
    char* end = nullptr;
    const long value = std::strtol(item.c_str(), &end, 10);
    if (*end != '\0' || value < min_value || value > 1 << 24) bad_value(key, text, expected);
    values.push_back(static_cast<int>(value));
  }
  return values;
}

TrainConfig TrainConfig::from(const RawConfig& raw) {
  TrainConfig c;
  c.raw = raw;
  c.model.type = config_choice(raw, "model.type", {"mlp", "cnn", "gpt"});
  c.model.hidden = config_int_list(raw, "model.hidden", 1);
  c.model.activation = config_choice(raw, "model.activation", {"relu", "gelu"});
  c.model.dropout = static_cast<float>(config_double(raw, "model.dropout", 0.0, 0.99));
  c.model.init = config_choice(raw, "model.init", {"kaiming", "xavier"});
  c.model.widths = config_int_list(raw, "model.widths", 1);
  c.model.blocks = static_cast<int>(config_int(raw, "model.blocks", 1));
  c.model.sync_bn = config_bool(raw, "model.sync_bn");
  c.model.n_layer = static_cast<int>(config_int(raw, "model.n_layer", 1));
  c.model.n_head = static_cast<int>(config_int(raw, "model.n_head", 1));
  c.model.d_model = static_cast<int>(config_int(raw, "model.d_model", 1));
  c.model.seq_len = static_cast<int>(config_int(raw, "model.seq_len", 1));
  c.model.vocab = static_cast<int>(config_int(raw, "model.vocab", 0));
  if (c.model.d_model % c.model.n_head != 0)
    throw ConfigError("config keys model.d_model = " + std::to_string(c.model.d_model) +
                      " and model.n_head = " + std::to_string(c.model.n_head) +
                      ": d_model must be a multiple of n_head");

  c.train.global_batch = config_int(raw, "train.global_batch", 1);
  c.train.micro_batch = config_int(raw, "train.micro_batch", 0);
  c.train.epochs = config_int(raw, "train.epochs", 1);
  c.train.max_steps = config_int(raw, "train.max_steps", 0);
  c.train.seed = static_cast<std::uint64_t>(config_int(raw, "train.seed", 0));
  c.train.eval_batch = config_int(raw, "train.eval_batch", 1);
  c.train.eval_every_epoch = config_bool(raw, "train.eval_every_epoch");
  c.train.eval_interval = config_int(raw, "train.eval_interval", 0);
  c.train.eval_max_samples = config_int(raw, "train.eval_max_samples", 0);

  c.optim.type = config_choice(raw, "optim.type", {"sgd", "adam", "adamw", "rmsprop"});
  c.optim.lr = static_cast<float>(config_double(raw, "optim.lr", 0.0, 1e3));
  c.optim.momentum = static_cast<float>(config_double(raw, "optim.momentum", 0.0, 0.999999));
  c.optim.nesterov = config_bool(raw, "optim.nesterov");
  c.optim.weight_decay = static_cast<float>(config_double(raw, "optim.weight_decay", 0.0, 10.0));
  c.optim.beta1 = static_cast<float>(config_double(raw, "optim.beta1", 0.0, 0.999999));
  c.optim.beta2 = static_cast<float>(config_double(raw, "optim.beta2", 0.0, 0.99999999));
  c.optim.eps = static_cast<float>(config_double(raw, "optim.eps", 1e-30, 1.0));
  c.optim.alpha = static_cast<float>(config_double(raw, "optim.alpha", 0.0, 0.999999));
  c.optim.clip_norm = static_cast<float>(config_double(raw, "optim.clip_norm", 0.0, 1e9));
  if (c.optim.nesterov && (c.optim.type != "sgd" || c.optim.momentum <= 0))
    throw ConfigError(
        "config key optim.nesterov = true needs optim.type = sgd and optim.momentum > 0");

  c.sched.type = config_choice(raw, "sched.type", {"constant", "step", "cosine", "onecycle"});
  c.sched.warmup_steps = config_int(raw, "sched.warmup_steps", 0);
  c.sched.step_size = config_int(raw, "sched.step_size", 1);
  c.sched.gamma = static_cast<float>(config_double(raw, "sched.gamma", 0.0, 1.0));
  c.sched.min_lr = static_cast<float>(config_double(raw, "sched.min_lr", 0.0, 1e3));
  c.sched.pct_start = static_cast<float>(config_double(raw, "sched.pct_start", 0.0, 1.0));
  c.sched.div_factor = static_cast<float>(config_double(raw, "sched.div_factor", 1.0, 1e9));
  c.sched.final_div_factor =
      static_cast<float>(config_double(raw, "sched.final_div_factor", 1.0, 1e12));

  c.data.train = raw.get("data.train");
  c.data.test = raw.get("data.test");
  c.data.shuffle = config_bool(raw, "data.shuffle");
  c.data.remainder = config_choice(raw, "data.remainder", {"partial", "drop"});
  c.data.cache_in_memory = config_choice(raw, "data.cache", {"none", "memory"}) == "memory";

  c.parallel.tp = static_cast<int>(config_int(raw, "parallel.tp", 1));
  c.parallel.pp = static_cast<int>(config_int(raw, "parallel.pp", 1));
  c.parallel.schedule = parse_pipeline_schedule(raw.get("parallel.schedule"));
  c.parallel.stages = raw.get("parallel.stages");
  c.parallel.backend = parse_comm_backend(raw.get("parallel.backend"));
  c.parallel.bucket_mb = config_double(raw, "parallel.bucket_mb", 0.001, 1e6);
  c.parallel.overlap = config_bool(raw, "parallel.overlap");
  c.parallel.zero = config_choice(raw, "parallel.zero", {"0", "1"}) == "1";

  c.run_dir = raw.get("run.dir");
  if (c.run_dir.empty()) throw ConfigError("config key run.dir must not be empty");
  c.log_interval = config_int(raw, "log.interval", 1);

  c.train.time_limit_s = config_double(raw, "train.time_limit", 0.0, 1e9);
  c.ckpt.dir = raw.get("ckpt.dir").empty() ? c.run_dir + "/checkpoints" : raw.get("ckpt.dir");
  c.ckpt.interval_steps = config_int(raw, "ckpt.interval_steps", 0);
  c.ckpt.interval_minutes = config_double(raw, "ckpt.interval_minutes", 0.0, 1e9);
  c.ckpt.keep = config_int(raw, "ckpt.keep", 0);
  c.ckpt.resume = raw.get("ckpt.resume");
  if (c.ckpt.resume.empty())
    throw ConfigError("config key ckpt.resume must be none, auto or a checkpoint directory");
  c.ckpt.margin_s = config_double(raw, "ckpt.margin_s", 0.0, 1e9);
  c.monitor.peak_tflops = config_double(raw, "monitor.peak_tflops", 0.0, 1e9);
  c.monitor.price_per_device_hour = config_double(raw, "cost.price_per_device_hour", 0.0, 1e9);
  c.monitor.spot_price_per_device_hour =
      config_double(raw, "cost.spot_price_per_device_hour", 0.0, 1e9);
  c.monitor.max_cost = config_double(raw, "budget.max_cost", 0.0, 1e15);
  c.monitor.max_hours = config_double(raw, "budget.max_hours", 0.0, 1e9);
  if (c.monitor.max_cost > 0 && c.monitor.price_per_device_hour <= 0)
    throw ConfigError("config key budget.max_cost needs cost.price_per_device_hour > 0");
  c.monitor.early_stop_metric =
      config_choice(raw, "early_stop.metric", {"none", "test_loss", "test_accuracy"});
  c.monitor.patience = config_int(raw, "early_stop.patience", 1);
  c.monitor.min_delta = config_double(raw, "early_stop.min_delta", 0.0, 1e9);
  if (c.monitor.early_stop_metric != "none" && c.data.test.empty())
    throw ConfigError("config key early_stop.metric = " + c.monitor.early_stop_metric +
                      " needs data.test (the metric is measured on it)");
  c.monitor.progress = config_choice(raw, "log.progress", {"auto", "bar", "lines"});
  c.fault.timeout_s = config_double(raw, "fault.timeout_s", 0.0, 1e9);
  c.fault.skip_nonfinite = config_choice(raw, "fault.nonfinite", {"skip", "abort"}) == "skip";
  c.fault.max_skips = config_int(raw, "fault.max_skips", 1);
  const std::string inject = raw.get("fault.inject");
  if (!inject.empty()) {
    const auto a = inject.find(':'), b = inject.find(':', a == std::string::npos ? a : a + 1);
    const std::string kind = b == std::string::npos ? "" : inject.substr(b + 1);
    try {
      if (a == std::string::npos || b == std::string::npos) throw std::invalid_argument(inject);
      c.fault.inject_rank = std::stoi(inject.substr(0, a));
      c.fault.inject_step = std::stoll(inject.substr(a + 1, b - a - 1));
    } catch (const std::exception&) {
      c.fault.inject_rank = -1;
    }
    if (c.fault.inject_rank < 0 || c.fault.inject_step < 1 ||
        (kind != "throw" && kind != "hang" && kind != "nan" && kind != "signal" &&
         kind != "kill_in_checkpoint"))
      throw ConfigError("config key fault.inject = \"" + inject +
                        "\": expected rank:step:kind, step >= 1, kind one of throw, hang, nan, "
                        "kill_in_checkpoint");
    c.fault.inject_kind = kind;
  }
  return c;
}

void TrainConfig::resolve_batch(int dp) {
  const std::int64_t global = train.global_batch;
  if (global % dp != 0)
    throw ConfigError("config key train.global_batch = " + std::to_string(global) +
                      " is not divisible by the " + std::to_string(dp) +
                      " data-parallel ranks; use a multiple of " + std::to_string(dp));
  const std::int64_t local = global / dp;
  if (train.micro_batch == 0) train.micro_batch = local;
  if (local % train.micro_batch != 0)
    throw ConfigError("config keys train.global_batch = " + std::to_string(global) +
                      " and train.micro_batch = " + std::to_string(train.micro_batch) +
                      ": global_batch must be a multiple of dp x micro_batch = " +
                      std::to_string(dp) + " x " + std::to_string(train.micro_batch));
  raw.set("train.micro_batch", std::to_string(train.micro_batch));
}

}  // namespace trellis
