// Metrics (train/monitoring/metrics.hpp): one IntervalReport per log interval with interval means
// (skipped steps left out of loss and accuracy), throughput from the step times, and every other
// report handed unchanged to every sink.
#include "catch.hpp"

#include "trellis/nn/mlp.hpp"
#include "trellis/train/monitoring/metrics.hpp"

#include <mpi.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

using namespace trellis;

namespace {

// Everything a sink received.
struct Recorded {
  std::vector<IntervalReport> intervals;
  std::vector<ProgressReport> progress;
  std::vector<EvalReport> evaluations;
  std::vector<CheckpointReport> checkpoints;
  std::vector<SparsityReport> sparsity;
  std::vector<RunSummary> summaries;
  int before_message = 0;
};

class RecordingSink : public MetricsSink {
 public:
  explicit RecordingSink(Recorded* out) : out_(out) {}
  void interval(const IntervalReport& r) override { out_->intervals.push_back(r); }
  void progress(const ProgressReport& r) override { out_->progress.push_back(r); }
  void evaluation(const EvalReport& r) override { out_->evaluations.push_back(r); }
  void checkpoint(const CheckpointReport& r) override { out_->checkpoints.push_back(r); }
  void sparsity(const SparsityReport& r) override { out_->sparsity.push_back(r); }
  void summary(const RunSummary& r) override { out_->summaries.push_back(r); }
  void before_message() override { ++out_->before_message; }

 private:
  Recorded* out_;
};

// An mlp 4 -> 8 -> 3: 6 x (4 x 8 + 8 x 3) = 336 FLOPs per sample; peak 2 TFLOP/s, $3.6 an hour.
struct Setup {
  TrainConfig config = TrainConfig::from(RawConfig::parse(
      "", {"--model.hidden=8", "--monitor.peak_tflops=2", "--cost.price_per_device_hour=3.6"}));
  DataShape shape{{4}, 4, 3, 0};
  nn::ParameterStore store;
  std::unique_ptr<nn::Mlp> mlp;
  std::unique_ptr<PerformanceModel> performance;
  Setup() {
    nn::MlpSpec spec;
    spec.input_dim = 4;
    spec.hidden = {8};
    spec.classes = 3;
    spec.capacity = 8;
    mlp = std::make_unique<nn::Mlp>(spec, store);
    store.finalize(1);
    performance = std::make_unique<PerformanceModel>(config, shape, *mlp, 1, -1, MPI_COMM_WORLD);
  }
};

// Step s of 8 samples: loss sum 2s, s correct, 0.25 s of wall time split over the phases.
StepRecord record(std::int64_t step, std::int64_t epoch, bool skipped = false) {
  StepRecord r;
  r.step = step;
  r.epoch = epoch;
  r.lr = 0.5f / static_cast<float>(step);
  r.loss_sum = skipped ? std::numeric_limits<double>::quiet_NaN() : 2.0 * step;
  r.correct = skipped ? 0.0 : static_cast<double>(step);
  r.targets = 8, r.samples = 8;
  r.grad_norm = 10.0 * step;
  r.skipped = skipped;
  r.loss_scale = 1024.0f;
  r.overflow_steps = step / 2;
  r.grad_wire_bytes = 100.0, r.grad_fp32_bytes = 400.0;
  r.times.data = 0.0625, r.times.compute = 0.125, r.times.comm = 0.03125;
  r.times.optimizer = 0.03125, r.times.total = 0.25;
  return r;
}

}  // namespace

TEST_CASE("one interval report per log interval and at the last step, with interval means",
          "[metrics]") {
  Setup s;
  CHECK(s.performance->flops_per_sample() == 336.0);
  Metrics metrics(*s.performance, 3, 0, 7, 0, -1);
  Recorded got;
  metrics.add_sink(std::make_unique<RecordingSink>(&got));
  std::int64_t skipped = 0;
  for (std::int64_t step = 1; step <= 7; ++step) {
    const bool skip = step == 2;
    skipped += skip ? 1 : 0;
    metrics.step(record(step, step <= 4 ? 0 : 1, skip), skipped);
    if (step == 4) metrics.checkpoint({4, "ckpt/step-0000004", 0.375});
  }
  REQUIRE(got.intervals.size() == 3);
  const IntervalReport& a = got.intervals[0];  // steps 1-3, step 2 skipped
  CHECK(a.step == 3);
  CHECK(a.epoch == 1);
  CHECK(a.total_steps == 7);
  CHECK(a.steps == 3);
  CHECK(a.loss == (2.0 + 6.0) / 16.0);  // steps 1 and 3 only
  CHECK(a.accuracy == (1.0 + 3.0) / 16.0);
  CHECK(a.lr == Approx(0.5 / 3));
  CHECK(a.grad_norm == 30.0);
  CHECK(a.skipped_steps == 1);
  CHECK(a.samples_per_sec == 24.0 / 0.75);
  CHECK(a.tokens_per_sec == 0.0);
  CHECK(a.step_time_s == 0.25);
  CHECK(a.per_step.data == 0.0625);
  CHECK(a.per_step.compute == 0.125);
  CHECK(a.per_step.total == 0.25);
  CHECK(a.per_step.checkpoint == 0.0);
  CHECK(a.tflops == Approx(336.0 * 32.0 * 1e-12));
  CHECK(a.mfu == Approx(336.0 * 32.0 / 2e12));
  CHECK(a.eta_s == 0.25 * (7 - 3));
  CHECK(a.loss_scale == 1024.0);
  CHECK(a.overflow_steps == 1);
  CHECK(a.grad_wire_bytes == 100.0);
  CHECK(a.grad_compression == 4.0);
  CHECK(a.host_rss_bytes > 0);
  CHECK(a.show_cost);
  CHECK(a.cost.device_hours > 0);
  CHECK(a.cost.on_demand == Approx(a.cost.device_hours * 3.6));
  CHECK(a.cost.projected_on_demand == Approx(a.cost.on_demand * 7.0 / 3.0));

  const IntervalReport& b = got.intervals[1];  // steps 4-6, the checkpoint after step 4
  CHECK(b.step == 6);
  CHECK(b.epoch == 2);
  CHECK(b.steps == 3);
  CHECK(b.loss == (8.0 + 10.0 + 12.0) / 24.0);
  CHECK(b.accuracy == (4.0 + 5.0 + 6.0) / 24.0);
  CHECK(b.per_step.checkpoint == 0.375 / 3);  // counted in the phase times ...
  CHECK(b.step_time_s == 0.25);               // ... but not in the step time or throughput
  CHECK(b.samples_per_sec == 32.0);
  CHECK(b.eta_s == 0.25);

  const IntervalReport& c = got.intervals[2];  // the run's last step, a short interval
  CHECK(c.step == 7);
  CHECK(c.steps == 1);
  CHECK(c.loss == 14.0 / 8.0);
  CHECK(c.accuracy == 7.0 / 8.0);
  CHECK(c.eta_s == 0.0);
  CHECK(c.skipped_steps == 1);

  // A progress report after every step, with that step's own loss.
  REQUIRE(got.progress.size() == 7);
  CHECK(got.progress[0].step == 1);
  CHECK(got.progress[0].epoch == 1);
  CHECK(got.progress[0].total_steps == 7);
  CHECK(got.progress[0].loss == 0.25);
  CHECK(got.progress[0].samples_per_sec == 32.0);
  CHECK(got.progress[0].eta_s == 0.25 * 6);
  CHECK(got.progress[6].epoch == 2);
  CHECK(got.progress[6].loss == 1.75);
  REQUIRE(got.checkpoints.size() == 1);
  CHECK(got.checkpoints[0].dir == "ckpt/step-0000004");

  RunSummary summary;
  metrics.summary(summary);
  CHECK(summary.ranks == 1);
  CHECK(summary.flops_per_sample == 336.0);
  CHECK(summary.peak_tflops_per_device == 2.0);
  CHECK(summary.peak_source == "monitor.peak_tflops");
  CHECK(summary.per_step.total == 0.25);  // over all 7 steps
  CHECK(summary.per_step.checkpoint == Approx(0.375 / 7));
  CHECK(summary.step_time_s == summary.per_step.total);
  CHECK(summary.samples_per_sec > 0);
  CHECK(summary.tflops == Approx(336.0 * summary.samples_per_sec * 1e-12));
  CHECK(summary.mfu == Approx(336.0 * summary.samples_per_sec / 2e12));
  CHECK(summary.price_per_device_hour == 3.6);
  CHECK(summary.cost.device_hours == Approx(summary.wall_time_s / 3600.0));
  CHECK(summary.cost.on_demand == Approx(summary.wall_time_s / 3600.0 * 3.6));
  REQUIRE(got.summaries.size() == 1);
  CHECK(got.summaries[0].samples_per_sec == summary.samples_per_sec);
  CHECK(got.summaries[0].flops_per_sample == 336.0);
}

TEST_CASE("an interval of a language model reports tokens; a resumed run counts from its start",
          "[metrics]") {
  Setup s;
  Metrics metrics(*s.performance, 4, 10, 20, 16, -1);  // resumed at step 10, 16 tokens a sample
  Recorded got;
  metrics.add_sink(std::make_unique<RecordingSink>(&got));
  metrics.step(record(11, 3), 0);
  metrics.step(record(12, 3), 0);  // 12 % 4 == 0: a report of the two steps since the resume
  REQUIRE(got.intervals.size() == 1);
  const IntervalReport& r = got.intervals[0];
  CHECK(r.steps == 2);
  CHECK(r.loss == (22.0 + 24.0) / 16.0);
  CHECK(r.samples_per_sec == 32.0);
  CHECK(r.tokens_per_sec == 32.0 * 16);
  CHECK(r.eta_s == 0.25 * 8);
  // The cost projects the steps of this run: 2 of the 10 it will take.
  const CostEstimate cost = metrics.cost_so_far();
  CHECK(cost.projected_on_demand == Approx(cost.on_demand * 5.0));
}

TEST_CASE("a skipped step is left out of the interval's means, not out of its throughput",
          "[metrics]") {
  Setup s;
  Metrics metrics(*s.performance, 2, 0, 4, 0, -1);
  Recorded got;
  metrics.add_sink(std::make_unique<RecordingSink>(&got));
  metrics.step(record(1, 0), 0);
  metrics.step(record(2, 0), 0);
  metrics.step(record(3, 0, true), 1);
  metrics.step(record(4, 0), 1);  // the interval's only finite step
  REQUIRE(got.intervals.size() == 2);
  CHECK(got.intervals[0].loss == (2.0 + 4.0) / 16.0);
  CHECK(got.intervals[0].skipped_steps == 0);
  CHECK(got.intervals[1].steps == 2);
  CHECK(got.intervals[1].loss == 8.0 / 8.0);
  CHECK(got.intervals[1].accuracy == 4.0 / 8.0);
  CHECK(std::isfinite(got.intervals[1].loss));
  CHECK(got.intervals[1].skipped_steps == 1);
  CHECK(got.intervals[1].samples_per_sec == 32.0);  // the skipped step still ran
}

TEST_CASE("the run's throughput leaves out the first step", "[metrics]") {
  Setup s;
  Metrics metrics(*s.performance, 100, 0, 3, 0, -1);
  StepRecord first = record(1, 0);
  first.samples = 1e9;  // the first step's one-time costs: its samples must not count
  metrics.step(first, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  metrics.step(record(2, 0), 0);
  metrics.step(record(3, 0), 0);
  RunSummary summary;
  metrics.summary(summary);
  CHECK(summary.samples_per_sec > 0);
  CHECK(summary.samples_per_sec <= 16.0 / 0.2);  // 16 samples after the first, >= 0.2 s
}

TEST_CASE("evaluation, checkpoint, sparsity and message reports reach every sink unchanged",
          "[metrics]") {
  Setup s;
  Metrics metrics(*s.performance, 10, 0, 100, 0, -1);
  Recorded one, two;
  metrics.add_sink(std::make_unique<RecordingSink>(&one));
  metrics.add_sink(std::make_unique<RecordingSink>(&two));
  EvalReport eval;
  eval.step = 40, eval.epoch = 2, eval.seconds = 1.5, eval.tokens = true;
  eval.result.loss = 0.75, eval.result.accuracy = 0.5, eval.result.samples = 64;
  eval.result.targets = 640;
  metrics.evaluation(eval);
  metrics.checkpoint({40, "runs/x/checkpoints/step-0000040", 2.25});
  SparsityReport sparse;
  sparse.step = 40, sparse.target = 0.5, sparse.sparsity = 0.25;
  sparse.layers = {{"fc1.weight", 8, 32}};
  metrics.sparsity(sparse);
  metrics.before_message();
  for (const Recorded* got : {&one, &two}) {
    REQUIRE(got->evaluations.size() == 1);
    const EvalReport& e = got->evaluations[0];
    CHECK(e.step == 40);
    CHECK(e.epoch == 2);
    CHECK(e.seconds == 1.5);
    CHECK(e.tokens);
    CHECK(e.result.loss == 0.75);
    CHECK(e.result.accuracy == 0.5);
    CHECK(e.result.samples == 64);
    CHECK(e.result.targets == 640);
    REQUIRE(got->checkpoints.size() == 1);
    CHECK(got->checkpoints[0].step == 40);
    CHECK(got->checkpoints[0].dir == "runs/x/checkpoints/step-0000040");
    CHECK(got->checkpoints[0].seconds == 2.25);
    REQUIRE(got->sparsity.size() == 1);
    CHECK(got->sparsity[0].step == 40);
    CHECK(got->sparsity[0].target == 0.5);
    CHECK(got->sparsity[0].sparsity == 0.25);
    REQUIRE(got->sparsity[0].layers.size() == 1);
    CHECK(got->sparsity[0].layers[0].name == "fc1.weight");
    CHECK(got->sparsity[0].layers[0].pruned == 8);
    CHECK(got->sparsity[0].layers[0].elements == 32);
    CHECK(got->before_message == 1);
    CHECK(got->intervals.empty());
  }
}

TEST_CASE("without sinks (ranks other than 0) the books are kept all the same", "[metrics]") {
  Setup s;
  Metrics metrics(*s.performance, 1, 0, 4, 0, -1);
  metrics.step(record(1, 0), 0);
  metrics.step(record(2, 0), 0);
  const CostEstimate cost = metrics.cost_so_far();
  CHECK(cost.device_hours > 0);
  CHECK(cost.on_demand == Approx(cost.device_hours * 3.6));
  CHECK(cost.projected_on_demand == Approx(cost.on_demand * 2.0));
  CHECK(metrics.elapsed_seconds() > 0);
}
