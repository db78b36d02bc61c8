// StepRunner (train/loop/step_runner.hpp): a step's record (step, lr from the 0-based step index,
// batch sums), and the fault.nonfinite policy: a skipped step leaves parameters and optimizer
// state bit-for-bit unchanged and is reported; abort and fault.max_skips throw.
#include "catch.hpp"
#include "unit/support/text_helpers.hpp"
#include "unit/support/train_helpers.hpp"

#include "trellis/core/error.hpp"
#include "trellis/train/input/batch_buffers.hpp"
#include "trellis/train/loop/step_runner.hpp"

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

using namespace trellis;
using namespace trellis::test;

namespace {

// A run with the StepRunner over 4 fixed samples; lr warms up over 10 steps (each step's differs).
struct Runner {
  explicit Runner(std::map<std::string, std::string> keys) : run(with_warmup(std::move(keys))) {}
  static std::map<std::string, std::string> with_warmup(std::map<std::string, std::string> keys) {
    keys.emplace("sched.warmup_steps", "10");
    return keys;
  }
  // Every parameter and optimizer state value, and the optimizer's step count, as bits.
  std::vector<std::uint32_t> snapshot() {
    std::vector<float> all = to_host(run.model->store().params());
    for (const auto& [name, view] : run.model->optimizer().state()) {
      const std::vector<float> state = to_host(view);
      all.insert(all.end(), state.begin(), state.end());
    }
    all.push_back(static_cast<float>(run.model->optimizer().step_count()));
    return bits_of(all);
  }
  float lr(std::int64_t index) const { return run.model->schedule().lr(index); }
  // What step `s` of epoch 0 throws ("" when it throws nothing).
  std::string error_of(std::int64_t s) {
    return message_of<Error>([&] { runner.run(0, s); });
  }

  TinyRun run;
  FixedSource data{*run.grid};
  BatchBuffers buffers{4, 4, 0};
  StepRunner runner{run.config, *run.grid,   *run.model,  data,
                    buffers,    *run.faults, *run.pruner, run.log};
};

void poison_bias(TinyRun& run, bool poison) {
  std::vector<float> bias = run.param("head.bias");
  bias[0] = poison ? std::numeric_limits<float>::quiet_NaN() : 0.0f;
  run.set_param("head.bias", bias);
}

}  // namespace

TEST_CASE("a finite step updates the parameters and reports its sums", "[step_runner]") {
  Runner r({});
  const std::vector<std::uint32_t> before = r.snapshot();
  const StepRecord record = r.runner.run(0, 0);
  CHECK(record.step == 1);
  CHECK(record.epoch == 0);
  CHECK_FALSE(record.skipped);
  CHECK(record.lr == r.lr(0));
  CHECK(record.lr == 0.005f);  // 0.05 x 1/10 of the warm-up
  CHECK(record.samples == 4.0);
  CHECK(record.targets == 4.0);
  CHECK(std::isfinite(record.loss_sum));
  CHECK(record.loss_sum > 0);
  CHECK(record.correct >= 0);
  CHECK(record.correct <= 4);
  CHECK(record.grad_norm > 0);
  CHECK(record.times.total > 0);
  CHECK(r.runner.completed() == 1);
  CHECK(r.runner.skipped() == 0);
  CHECK(r.run.model->optimizer().step_count() == 1);
  CHECK(r.snapshot() != before);

  // After a resume the run continues from the restored step, its lr and skipped count.
  r.runner.restore(6, 2);
  const StepRecord next = r.runner.run(0, 6);
  CHECK(next.step == 7);
  CHECK(next.lr == r.lr(6));
  CHECK(r.runner.completed() == 7);
  CHECK(r.runner.skipped() == 2);
}

TEST_CASE("a non-finite step is skipped: parameters and optimizer state unchanged",
          "[step_runner]") {
  Runner r({{"fault.inject", "0:2:nan"}, {"fault.nonfinite", "skip"}});
  CHECK_FALSE(r.runner.run(0, 0).skipped);
  const std::vector<std::uint32_t> before = r.snapshot();
  const StepRecord skipped = r.runner.run(0, 1);  // step 2: its loss scale is NaN
  CHECK(skipped.step == 2);
  CHECK(skipped.skipped);
  CHECK_FALSE((std::isfinite(skipped.loss_sum) && std::isfinite(skipped.grad_norm)));
  CHECK(skipped.lr == r.lr(1));
  CHECK(r.snapshot() == before);  // bit for bit, the optimizer's step count included
  CHECK(r.runner.completed() == 2);
  CHECK(r.runner.skipped() == 1);

  const StepRecord next = r.runner.run(0, 2);  // the schedule moved on past the skipped step
  CHECK(next.step == 3);
  CHECK_FALSE(next.skipped);
  CHECK(next.lr == r.lr(2));
  CHECK(next.lr != r.lr(1));
  CHECK(r.snapshot() != before);
  CHECK(r.runner.skipped() == 1);
}

TEST_CASE("fault.nonfinite = abort throws at a non-finite step, parameters unchanged",
          "[step_runner]") {
  Runner r({{"fault.inject", "0:1:nan"}, {"fault.nonfinite", "abort"}});
  const std::vector<std::uint32_t> before = r.snapshot();
  const std::string message = r.error_of(0);
  CHECK(contains(message, "at step 1"));
  CHECK(contains(message, "fault.nonfinite = abort"));
  CHECK(r.snapshot() == before);
}

TEST_CASE("more than fault.max_skips skipped steps in a row throw; a finite step resets",
          "[step_runner]") {
  Runner r({{"fault.nonfinite", "skip"}, {"fault.max_skips", "2"}});
  poison_bias(r.run, true);  // every loss is NaN from here on
  const std::vector<std::uint32_t> before = r.snapshot();
  CHECK(r.runner.run(0, 0).skipped);
  CHECK(r.runner.run(0, 1).skipped);
  CHECK(r.snapshot() == before);
  const std::string message = r.error_of(2);
  CHECK(contains(message, "3 steps in a row"));
  CHECK(contains(message, "fault.max_skips = 2"));
  CHECK(r.snapshot() == before);

  Runner reset({{"fault.nonfinite", "skip"}, {"fault.max_skips", "1"}});
  poison_bias(reset.run, true);
  CHECK(reset.runner.run(0, 0).skipped);  // 1 in a row
  poison_bias(reset.run, false);
  CHECK_FALSE(reset.runner.run(0, 1).skipped);
  poison_bias(reset.run, true);
  CHECK(reset.error_of(2).empty());  // 1 in a row again, not 2
  CHECK(reset.runner.skipped() == 2);
}
