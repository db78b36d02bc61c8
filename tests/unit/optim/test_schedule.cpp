// Learning-rate schedules at chosen steps: warm-up boundaries, step-decay boundaries, cosine
// midpoint and end, one-cycle start/peak/end, and the config errors.
#include "catch.hpp"
#include "unit/support/optim_helpers.hpp"

#include "trellis/optim/schedule.hpp"

using optim_test::config_error_of;
using optim_test::contains;

namespace {

trellis::ScheduleSpec spec_of(const std::string& type, float base_lr) {
  trellis::ScheduleSpec spec;  // torch's defaults where the type uses them
  spec.type = trellis::parse_schedule_type(type);
  spec.base_lr = base_lr;
  spec.gamma = 0.1f;
  spec.pct_start = 0.3f;
  spec.div_factor = 25.0f;
  spec.final_div_factor = 1e4f;
  return spec;
}

Approx near(double value) { return Approx(value).epsilon(1e-6).margin(1e-12); }

}  // namespace

TEST_CASE("constant schedule with linear warm-up", "[optim][schedule]") {
  auto spec = spec_of("constant", 0.1f);
  CHECK(trellis::LrSchedule(spec).lr(0) == near(0.1));  // no warm-up: full lr at once
  spec.warmup_steps = 4;
  const trellis::LrSchedule sched(spec);
  CHECK(sched.lr(0) == near(0.025));  // base * (step + 1) / warmup: never 0
  CHECK(sched.lr(1) == near(0.05));
  CHECK(sched.lr(3) == near(0.1));  // last warm-up step reaches base
  CHECK(sched.lr(4) == near(0.1));
  CHECK(sched(1000000) == near(0.1));
}

TEST_CASE("step schedule decays by gamma every step_size steps after warm-up",
          "[optim][schedule]") {
  auto spec = spec_of("step", 0.1f);
  spec.warmup_steps = 2;
  spec.step_size = 3;
  spec.gamma = 0.5f;
  const trellis::LrSchedule sched(spec);
  CHECK(sched.lr(0) == near(0.05));
  CHECK(sched.lr(1) == near(0.1));
  CHECK(sched.lr(2) == near(0.1));  // decay counts from the end of warm-up
  CHECK(sched.lr(4) == near(0.1));
  CHECK(sched.lr(5) == near(0.05));
  CHECK(sched.lr(7) == near(0.05));
  CHECK(sched.lr(8) == near(0.025));
  CHECK(sched.lr(2 + 30) == near(0.1 / 1024));
}

TEST_CASE("cosine schedule anneals from base_lr to min_lr after warm-up", "[optim][schedule]") {
  auto spec = spec_of("cosine", 1.0f);
  spec.min_lr = 0.1f;
  spec.warmup_steps = 10;
  spec.total_steps = 110;  // 100 annealing steps
  const trellis::LrSchedule sched(spec);
  CHECK(sched.lr(0) == near(0.1));
  CHECK(sched.lr(9) == near(1.0));
  CHECK(sched.lr(10) == near(1.0));
  CHECK(sched.lr(35) == near(0.1 + 0.9 * 0.8535533905932737));  // (1 + cos(pi/4)) / 2
  CHECK(sched.lr(60) == near(0.55));                            // midpoint
  CHECK(sched.lr(109) == near(0.1002220385));                   // (1 + cos(0.99 pi)) / 2
  CHECK(sched.lr(110) == near(0.1));
  CHECK(sched.lr(500) == near(0.1));  // held at min_lr

  auto no_warmup = spec_of("cosine", 1.0f);
  no_warmup.total_steps = 100;
  CHECK(trellis::LrSchedule(no_warmup).lr(0) == near(1.0));
  CHECK(trellis::LrSchedule(no_warmup).lr(50) == near(0.5));
}

TEST_CASE("onecycle matches torch OneCycleLR with cos annealing", "[optim][schedule]") {
  auto spec = spec_of("onecycle", 0.1f);
  spec.total_steps = 100;
  spec.pct_start = 0.25f;  // warm phase ends at step 0.25 * 100 - 1 = 24
  spec.div_factor = 25.f;
  spec.final_div_factor = 1e4f;
  const trellis::LrSchedule sched(spec);
  CHECK(sched.lr(0) == near(0.004));                        // max / div_factor
  CHECK(sched.lr(12) == near(0.052));                       // halfway up: (0.004 + 0.1) / 2
  CHECK(sched.lr(24) == near(0.1));                         // peak
  CHECK(sched.lr(49) == near(4e-7 + (0.1 - 4e-7) * 0.75));  // a third of the way down
  CHECK(sched.lr(99) == near(4e-7));                        // max / (div_factor * final_div_factor)
  CHECK(sched.lr(150) == near(4e-7));

  spec.warmup_steps = 10;  // ignored by onecycle
  const trellis::LrSchedule with_warmup(spec);
  for (std::int64_t s : {0, 5, 24, 60, 99}) CHECK(with_warmup.lr(s) == sched.lr(s));
}

TEST_CASE("bad schedule specs name the config key", "[optim][schedule]") {
  auto error_for = [](const trellis::ScheduleSpec& spec) {
    return config_error_of([&] { trellis::LrSchedule sched(spec); });
  };
  const std::string unknown =
      config_error_of([] { trellis::LrSchedule sched(spec_of("linear", 0.1f)); });
  CHECK(contains(unknown, "sched.type"));
  CHECK(contains(unknown, "constant, step, cosine, onecycle"));

  CHECK(contains(error_for(spec_of("constant", -0.1f)), "optim.lr"));
  auto warmup = spec_of("constant", 0.1f);
  warmup.warmup_steps = -1;
  CHECK(contains(error_for(warmup), "sched.warmup_steps"));

  auto step = spec_of("step", 0.1f);
  CHECK(contains(error_for(step), "sched.step_size"));  // default step_size 0
  step.step_size = 10;
  step.gamma = 0.f;
  CHECK(contains(error_for(step), "sched.gamma"));

  auto cosine = spec_of("cosine", 0.1f);
  CHECK(contains(error_for(cosine), "total steps"));  // default total 0
  cosine.warmup_steps = 100;
  cosine.total_steps = 200;
  cosine.min_lr = 0.2f;
  CHECK(contains(error_for(cosine), "sched.min_lr"));

  auto onecycle = spec_of("onecycle", 0.1f);
  CHECK(contains(error_for(onecycle), "total steps"));  // default total 0
  onecycle.total_steps = 100;
  onecycle.pct_start = 1.f;
  CHECK(contains(error_for(onecycle), "sched.pct_start"));
  onecycle.pct_start = 0.01f;  // warm phase would end at step 0: torch divides by zero
  CHECK(contains(error_for(onecycle), "sched.pct_start"));
  onecycle.pct_start = 0.3f;
  onecycle.div_factor = 0.f;
  CHECK(contains(error_for(onecycle), "sched.div_factor"));
  onecycle.div_factor = 25.f;
  onecycle.final_div_factor = -1.f;
  CHECK(contains(error_for(onecycle), "sched.final_div_factor"));
  CHECK(error_for([] {
          auto ok = spec_of("onecycle", 0.1f);
          ok.total_steps = 100;
          return ok;
        }()) == "");
}

TEST_CASE("a warm-up longer than the run is cut to the run's length with a warning",
          "[optim][schedule]") {
  for (const char* type : {"cosine", "constant", "step"}) {
    INFO(type);
    auto spec = spec_of(type, 1.0f);
    spec.step_size = 1000;
    spec.warmup_steps = 100;  // fashion_mlp.ini's warm-up in a --train.max_steps=20 run
    spec.total_steps = 20;
    const trellis::LrSchedule sched(spec);
    CHECK(sched.spec().warmup_steps == 20);
    CHECK(contains(sched.warning(), "sched.warmup_steps = 100"));
    CHECK(contains(sched.warning(), "20 steps"));
    CHECK(sched.lr(0) == near(1.0 / 20));
    CHECK(sched.lr(19) == near(1.0));  // reaches base_lr at the run's last step
  }
  auto fits = spec_of("cosine", 1.0f);
  fits.warmup_steps = 10;
  fits.total_steps = 100;
  CHECK(trellis::LrSchedule(fits).warning().empty());
  CHECK(trellis::LrSchedule(fits).spec().warmup_steps == 10);
}
