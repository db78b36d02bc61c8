#include "trellis/train/monitoring/tensorboard_sink.hpp"
#include "trellis/core/error.hpp"

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace trellis {

namespace {

namespace fs = std::filesystem;

// Moves the event files of an earlier run in `dir` into dir/previous-runs/<n>/ (the first
// free n); returns that folder, or "" when there were none.
std::string move_earlier_event_files(const std::string& dir) {
  std::error_code ec;
  std::vector<fs::path> events;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file() &&
        it->path().filename().string().rfind("events.out.tfevents.", 0) == 0)
      events.push_back(it->path());
  if (events.empty()) return "";
  fs::path target;
  for (int n = 1;; ++n) {
    target = fs::path(dir) / "previous-runs" / std::to_string(n);
    if (!fs::exists(target)) break;
  }
  fs::create_directories(target, ec);
  if (ec) throw Error("cannot create '" + target.string() + "': " + ec.message());
  for (const fs::path& file : events) {
    fs::rename(file, target / file.filename(), ec);
    if (ec)
      throw Error("cannot move '" + file.string() + "' to '" + target.string() +
                  "': " + ec.message());
  }
  return target.string();
}

// TensorBoardWriter creates the directory; the earlier files move first.
std::string prepared(const std::string& run_dir, bool resumed, const Logger& log) {
  if (!resumed) {
    const std::string moved = move_earlier_event_files(run_dir);
    if (!moved.empty())
      log.warn("run.dir " + run_dir + " held TensorBoard files of an earlier run: moved to " +
               moved + " (a fresh run; resume with --resume auto to continue one)");
  }
  return run_dir;
}

}  // namespace

TensorBoardSink::TensorBoardSink(const std::string& run_dir, bool resumed,
                                 const std::string& config_ini, std::int64_t step,
                                 const Logger& log)
    : writer_(prepared(run_dir, resumed, log), true) {
  writer_.add_text("config", "```\n" + config_ini + "```", step);
  writer_.flush();
}

void TensorBoardSink::interval(const IntervalReport& r) {
  TensorBoardWriter& tb = writer_;
  const std::int64_t s = r.step;
  tb.add_scalar("train/loss", r.loss, s);
  tb.add_scalar("train/accuracy", r.accuracy, s);
  tb.add_scalar("train/lr", r.lr, s);
  tb.add_scalar("train/grad_norm", r.grad_norm, s);
  tb.add_scalar("train/loss_scale", r.loss_scale, s);
  tb.add_scalar("train/overflow_steps", static_cast<double>(r.overflow_steps), s);
  tb.add_scalar("comm/grad_wire_bytes", r.grad_wire_bytes, s);
  tb.add_scalar("comm/grad_compression", r.grad_compression, s);
  tb.add_scalar("perf/samples_per_sec", r.samples_per_sec, s);
  tb.add_scalar("perf/tflops", r.tflops, s);
  tb.add_scalar("perf/mfu", r.mfu, s);
  tb.add_scalar("time/step_s", r.step_time_s, s);
  tb.add_scalar("time/data_s", r.per_step.data, s);
  tb.add_scalar("time/compute_s", r.per_step.compute, s);
  tb.add_scalar("time/comm_s", r.per_step.comm, s);
  tb.add_scalar("time/tp_comm_s", r.per_step.tp_comm, s);
  tb.add_scalar("time/pipeline_s", r.per_step.pipeline, s);
  tb.add_scalar("time/optimizer_s", r.per_step.optimizer, s);
  tb.add_scalar("memory/host_rss_bytes", static_cast<double>(r.host_rss_bytes), s);
  tb.add_scalar("memory/current_bytes", static_cast<double>(r.memory.current_total), s);
  tb.add_scalar("memory/peak_bytes", static_cast<double>(r.memory.peak_total), s);
  for (int c = 0; c < kMemoryCategories; ++c)
    tb.add_scalar(
        std::string("memory/peak/") + memory_category_name(static_cast<MemoryCategory>(c)),
        static_cast<double>(r.memory.peak[static_cast<std::size_t>(c)]), s);
  tb.add_scalar("cost/so_far", r.cost.on_demand, s);
  tb.add_scalar("cost/projected", r.cost.projected_on_demand, s);
  if (r.gpu.valid) {
    tb.add_scalar("gpu/utilization_pct", r.gpu.utilization_pct, s);
    tb.add_scalar("gpu/memory_used_bytes", r.gpu.memory_used_bytes, s);
    tb.add_scalar("gpu/power_w", r.gpu.power_watts, s);
    tb.add_scalar("gpu/temperature_c", r.gpu.temperature_c, s);
  }
  tb.flush();
}

void TensorBoardSink::evaluation(const EvalReport& r) {
  writer_.add_scalar("eval/loss", r.result.loss, r.step);
  writer_.add_scalar("eval/accuracy", r.result.accuracy, r.step);
  writer_.flush();
}

void TensorBoardSink::sparsity(const SparsityReport& r) {
  writer_.add_scalar("sparsity/total", r.sparsity, r.step);
  for (const LayerSparsity& layer : r.layers)
    writer_.add_scalar("sparsity/" + layer.name,
                       static_cast<double>(layer.pruned) /
                           static_cast<double>(std::max<std::int64_t>(layer.elements, 1)),
                       r.step);
  writer_.flush();
}

}  // namespace trellis
