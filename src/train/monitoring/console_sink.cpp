#include "trellis/train/monitoring/console_sink.hpp"
#include "trellis/core/format.hpp"

#include <cstdio>

namespace trellis {

void ConsoleSink::interval(const IntervalReport& r) {
  // A language model's throughput in tokens, the unit its users count in.
  const std::string throughput = r.tokens_per_sec > 0
                                     ? format_text("%.0f tokens/s", r.tokens_per_sec)
                                     : format_text("%.0f samples/s", r.samples_per_sec);
  std::string line =
      format_text("epoch %.0f step %6.0f/%.0f  loss %.4f  lr %.4g  ", static_cast<double>(r.epoch),
                  static_cast<double>(r.step), static_cast<double>(r.total_steps), r.loss, r.lr) +
      throughput +
      format_text("  %.3g TFLOP/s  MFU %.1f%%  ETA %.0f s", r.tflops, 100.0 * r.mfu, r.eta_s);
  if (r.show_cost)
    line +=
        format_text("  cost %.2f (projected %.2f)", r.cost.on_demand, r.cost.projected_on_demand);
  if (!bar_.enabled()) log_.info(line);
}

void ConsoleSink::progress(const ProgressReport& r) {
  bar_.update(r.epoch, r.step, r.total_steps, r.loss, r.samples_per_sec, r.eta_s);
}

void ConsoleSink::evaluation(const EvalReport& r) {
  bar_.clear();
  const EvalResult& e = r.result;
  if (r.tokens)
    log_.info(format_text(
        "epoch %.0f step %.0f  validation loss %.4f  %.4f bits per token  (%.0f sequences, %.1f s)",
        static_cast<double>(r.epoch), static_cast<double>(r.step), e.loss, e.bits_per_target(),
        static_cast<double>(e.samples), r.seconds));
  else
    log_.info(
        format_text("epoch %.0f  test loss %.4f  test accuracy %.2f%%  (%.0f samples, %.1f s)",
                    static_cast<double>(r.epoch), e.loss, 100.0 * e.accuracy,
                    static_cast<double>(e.samples), r.seconds));
}

void ConsoleSink::checkpoint(const CheckpointReport& r) {
  bar_.clear();
  log_.info("checkpoint: " + r.dir +
            format_text(" (step %.0f, %.2f s)", static_cast<double>(r.step), r.seconds));
}

void ConsoleSink::sparsity(const SparsityReport& r) {
  bar_.clear();
  log_.info(format_text("prune: step %.0f, sparsity %.2f%% of the pruned weights (target %.2f%%)",
                        static_cast<double>(r.step), 100.0 * r.sparsity, 100.0 * r.target));
}

void ConsoleSink::summary(const RunSummary& r) {
  bar_.clear();
  const StepTimes& t = r.per_step;
  // A resumed run: this segment's steps and time, then the run's total.
  const std::int64_t segment = r.steps - r.first_step;
  const std::string steps =
      r.first_step > 0
          ? format_text("%.0f steps (steps %.0f-%.0f; the run has %.0f)",
                        static_cast<double>(segment), static_cast<double>(r.first_step + 1),
                        static_cast<double>(r.steps), static_cast<double>(r.steps))
          : format_text("%.0f steps", static_cast<double>(r.steps));
  const std::string tokens =
      r.tokens_per_sec > 0 ? format_text(" (%.0f tokens/s)", r.tokens_per_sec) : std::string();
  log_.info("done: " + steps +
            format_text(" in %.1f s, %.0f samples/s", r.wall_time_s, r.samples_per_sec) + tokens +
            format_text(" after the first step, %.3g TFLOP/s, MFU %.1f%% of %.3g TFLOP/s per "
                        "device (",
                        r.tflops, 100.0 * r.mfu, r.peak_tflops_per_device) +
            r.peak_source + ")");
  log_.info(format_text("time per step: data %.1f ms, compute %.1f ms, exposed comm %.1f ms, "
                        "pipeline %.1f ms, optimizer %.1f ms",
                        1e3 * t.data, 1e3 * t.compute, 1e3 * t.comm, 1e3 * t.pipeline,
                        1e3 * t.optimizer) +
            format_text(", tp collectives %.1f ms (+ %.1f ms of checkpoints)", 1e3 * t.tp_comm,
                        1e3 * t.checkpoint));
  if (r.price_per_device_hour > 0 || r.spot_price_per_device_hour > 0)
    log_.info(
        format_text("cost: %.4g device-hours = %.4g on demand, %.4g spot (cost.* prices per "
                    "device-hour %.4g / %.4g)",
                    r.cost.device_hours, r.cost.on_demand, r.cost.spot, r.price_per_device_hour,
                    r.spot_price_per_device_hour));
  if (r.memory.peak_total > 0) log_.info("memory: peak " + describe_memory_peak(r.memory));
  if (!r.weights_path.empty()) log_.info("weights: " + r.weights_path);
}

}  // namespace trellis
