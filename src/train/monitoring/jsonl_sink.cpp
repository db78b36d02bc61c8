#include "trellis/train/monitoring/jsonl_sink.hpp"
#include "trellis/core/error.hpp"
#include "trellis/train/monitoring/json_line.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

namespace trellis {

namespace {

// Mean seconds per step of each phase, the same keys in metrics.jsonl and summary.json.
void add_phase_times(JsonLine& line, const StepTimes& t) {
  line.add("data_time_s", t.data)
      .add("compute_time_s", t.compute)
      .add("comm_time_s", t.comm)
      .add("tp_comm_time_s", t.tp_comm)
      .add("pipeline_time_s", t.pipeline)
      .add("optimizer_time_s", t.optimizer)
      .add("checkpoint_time_s", t.checkpoint);
}

// {"all_reduce": {"calls": N, "bytes": B}, ...}: the kinds the step issued.
JsonLine tally_json(const CollectiveTally& tally) {
  JsonLine out;
  for (std::size_t k = 0; k < kCollectiveKinds; ++k) {
    const CollectiveCount& c = tally.by_kind[k];
    if (c.calls == 0) continue;
    JsonLine one;
    one.add("calls", c.calls).add("bytes", c.bytes);
    out.add_object(collective_kind_name(static_cast<CollectiveKind>(k)), one);
  }
  return out;
}

JsonLine collectives_json(const StepCollectives& c) {
  JsonLine out;
  out.add_object("tp", tally_json(c.tp))
      .add_object("dp", tally_json(c.dp))
      .add_object("pp", tally_json(c.pp))
      .add_object("embedding", tally_json(c.embedding));
  return out;
}

// A Slurm variable of this attempt's environment, or "" outside Slurm.
std::string slurm_env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

// attempts.jsonl: one line per attempt that reached its summary, appended, so a job requeued
// after preemption keeps every attempt's device-hours (summary.json holds the last one's) for
// tools/cost_report, beside the Slurm job and nodes it ran as. An attempt killed without a
// summary (a lost node) leaves no line.
void append_attempt(const std::string& path, const RunSummary& r) {
  const double ended =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  JsonLine line;
  line.add("ended_unix_s", ended)
      .add("wall_time_s", r.wall_time_s)
      .add("ranks", r.ranks)
      .add("device_hours", r.cost.device_hours)
      .add("first_step", r.first_step)
      .add("steps", r.steps)
      .add("finish", r.finish)
      .add("slurm_job_id", slurm_env("SLURM_JOB_ID"))
      .add("slurm_restart_count", slurm_env("SLURM_RESTART_COUNT"))
      .add("slurm_nodelist", slurm_env("SLURM_JOB_NODELIST"))
      .add("slurm_partition", slurm_env("SLURM_JOB_PARTITION"));
  std::ofstream out(path, std::ios::app);
  out << line.str() << "\n";
  if (!out) throw Error("cannot append to " + path + ": " + std::strerror(errno));
}

}  // namespace

JsonlSink::JsonlSink(const std::string& run_dir, std::int64_t resumed_step)
    : run_dir_(run_dir), log_(run_dir + "/metrics.jsonl", true, resumed_step) {
  // A fresh run's attempts start here; a resumed one adds to the earlier attempts' lines.
  if (resumed_step < 0) std::remove((run_dir + "/attempts.jsonl").c_str());
}

void JsonlSink::interval(const IntervalReport& r) {
  JsonLine line;
  line.add("step", r.step)
      .add("epoch", r.epoch)
      .add("loss", r.loss)
      .add("train_accuracy", r.accuracy)
      .add("lr", r.lr)
      .add("grad_norm", r.grad_norm)
      .add("samples_per_sec", r.samples_per_sec)
      .add("tokens_per_sec", r.tokens_per_sec)
      .add("step_time_s", r.step_time_s);
  add_phase_times(line, r.per_step);
  line.add("tflops", r.tflops)
      .add("mfu", r.mfu)
      .add("host_rss_bytes", r.host_rss_bytes)
      .add("skipped_steps", r.skipped_steps)
      .add("loss_scale", r.loss_scale)
      .add("overflow_steps", r.overflow_steps)
      .add("grad_wire_bytes", r.grad_wire_bytes)
      .add("grad_compression", r.grad_compression)
      .add("cost_so_far", r.cost.on_demand)
      .add("projected_cost", r.cost.projected_on_demand)
      .add("projected_spot_cost", r.cost.projected_spot)
      .add("eta_s", r.eta_s);
  if (r.device_memory_used_bytes) line.add("device_memory_used_bytes", *r.device_memory_used_bytes);
  line.add("memory_bytes", r.memory.current_total)
      .add("memory_peak_bytes", r.memory.peak_total)
      .add_object("memory_peak", memory_json(r.memory.peak));
  if (r.gpu.valid)
    line.add("gpu_utilization_pct", r.gpu.utilization_pct)
        .add("gpu_memory_used_bytes", r.gpu.memory_used_bytes)
        .add("gpu_power_w", r.gpu.power_watts)
        .add("gpu_temperature_c", r.gpu.temperature_c);
  log_.write(line);
}

void JsonlSink::evaluation(const EvalReport& r) {
  log_.write(JsonLine()
                 .add("step", r.step)
                 .add("epoch", r.epoch)
                 .add("test_loss", r.result.loss)
                 .add("test_accuracy", r.result.accuracy)
                 .add("test_samples", r.result.samples)
                 .add("test_bits_per_token", r.tokens ? r.result.bits_per_target() : 0.0)
                 .add("eval_time_s", r.seconds));
}

void JsonlSink::checkpoint(const CheckpointReport& r) {
  log_.write(JsonLine().add("step", r.step).add("checkpoint_time_s", r.seconds));
}

void JsonlSink::sparsity(const SparsityReport& r) {
  JsonLine layers;
  for (const LayerSparsity& layer : r.layers)
    layers.add(layer.name, static_cast<double>(layer.pruned) /
                               static_cast<double>(std::max<std::int64_t>(layer.elements, 1)));
  log_.write(JsonLine()
                 .add("step", r.step)
                 .add("sparsity_target", r.target)
                 .add("sparsity", r.sparsity)
                 .add_object("sparsity_per_layer", layers));
}

void JsonlSink::summary(const RunSummary& r) {
  JsonLine s;
  s.add("steps", r.steps)
      .add("finish", r.finish)
      .add("first_step", r.first_step)
      .add("ranks", r.ranks)
      .add("wall_time_s", r.wall_time_s)
      .add("samples_per_sec", r.samples_per_sec)
      .add("tokens_per_sec", r.tokens_per_sec)
      .add("parameters", r.parameters)
      .add("pipeline_bubble_fraction", r.pipeline_bubble_fraction)
      .add("parameters_per_rank", r.parameters_per_rank)
      .add("optimizer_state_floats_per_rank", r.optimizer_state_floats_per_rank)
      .add("flops_per_sample", r.flops_per_sample)
      .add("tflops", r.tflops)
      .add("peak_tflops_per_device", r.peak_tflops_per_device)
      .add("peak_source", r.peak_source)
      .add("mfu", r.mfu)
      .add("step_time_s", r.step_time_s);
  add_phase_times(s, r.per_step);
  s.add("skipped_steps", r.skipped_steps)
      .add("precision", r.precision)
      .add("overflow_steps", r.overflow_steps)
      .add("loss_scale", r.loss_scale)
      .add("host_rss_bytes", r.host_rss_bytes)
      .add("device_hours", r.cost.device_hours)
      .add("cost_on_demand", r.cost.on_demand)
      .add("cost_spot", r.cost.spot);
  if (r.last_eval)
    s.add("test_loss", r.last_eval->loss).add("test_accuracy", r.last_eval->accuracy);
  s.add("memory_peak_bytes", r.memory.peak_total)
      .add("memory_peak_rank", r.memory.peak_rank)
      .add_object("memory_at_peak", memory_json(r.memory.at_peak))
      .add_object("memory_peak", memory_json(r.memory.peak))
      .add("memory_plan_bytes",
           std::accumulate(r.memory_plan.begin(), r.memory_plan.end(), std::int64_t{0}))
      .add_object("memory_plan", memory_json(r.memory_plan))
      .add_object("collectives_per_step", collectives_json(r.collectives_per_step));
  const std::string path = run_dir_ + "/summary.json";
  std::ofstream out(path);
  out << s.str() << "\n";
  if (!out) throw Error("cannot write " + path);
  append_attempt(run_dir_ + "/attempts.jsonl", r);
}

}  // namespace trellis

// MetricsLog: metrics.jsonl itself.
namespace trellis {

namespace {

// The "step" of a line JsonLine wrote ({"step": N, ...}), or -1.
std::int64_t step_of(const std::string& line) {
  const std::string key = "\"step\": ";
  const auto at = line.find(key);
  if (at == std::string::npos) return -1;
  return std::strtoll(line.c_str() + at + key.size(), nullptr, 10);
}

}  // namespace

MetricsLog::MetricsLog(const std::string& path, bool enabled, std::int64_t resumed_step)
    : path_(path) {
  if (!enabled) return;
  std::vector<std::string> kept;
  if (resumed_step >= 0) {
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);)
      if (step_of(line) <= resumed_step) kept.push_back(line);
  }
  file_ = std::fopen(path.c_str(), "w");
  if (!file_)
    throw Error("cannot open metrics file '" + path + "' for writing: " + std::strerror(errno));
  for (const std::string& line : kept) std::fprintf(file_, "%s\n", line.c_str());
}

MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
}

void MetricsLog::write(const JsonLine& line) {
  if (!file_) return;
  const std::string text = line.str() + "\n";
  if (std::fwrite(text.data(), 1, text.size(), file_) != text.size() || std::fflush(file_) != 0)
    throw Error("cannot write metrics file '" + path_ + "': " + std::strerror(errno));
}

}  // namespace trellis
