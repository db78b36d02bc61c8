// Learning-rate schedules: lr as a pure function of the 0-based step, so a resumed run needs
// no scheduler state beyond the step count.
//
// Warm-up (all types but onecycle), W = min(warmup_steps, total_steps when > 0):
//   step < W:  lr = base_lr * (step + 1) / W       (reaches base_lr at step W - 1; never 0)
// then, with s = step - W:
//   constant:  lr = base_lr
//   step:      lr = base_lr * gamma^floor(s / step_size)                 (torch StepLR)
//   cosine:    lr = min_lr + (base_lr - min_lr) * (1 + cos(pi * s / T)) / 2,  T = total - W,
//              held at min_lr from step total_steps on               (torch CosineAnnealingLR)
// onecycle (torch OneCycleLR, anneal_strategy="cos", three_phase=False; ignores warmup_steps),
//   with max = base_lr, start = max / div_factor, final = start / final_div_factor,
//   e1 = pct_start * total_steps - 1, e2 = total_steps - 1:
//   step <= e1: lr = cos_anneal(start, max, step / e1)
//   otherwise:  lr = cos_anneal(max, final, (step - e1) / (e2 - e1)), held at final past e2
//   cos_anneal(a, b, x) = b + (a - b) * (1 + cos(pi * x)) / 2
// torch raises past the last step; here the final lr holds, so an extra step is harmless.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace trellis {

enum class ScheduleType { constant, step, cosine, onecycle };

// sched.type's names, the one list (the config table, the messages and the tests read it).
const std::vector<std::pair<const char*, ScheduleType>>& schedule_type_names();
const char* schedule_type_name(ScheduleType type);
// ConfigError naming sched.type, the value and the names allowed.
ScheduleType parse_schedule_type(const std::string& name);

// The sched.* section of the configuration, plus base_lr and total_steps, which are no
// sched.* keys: TrainConfig::schedule_spec() fills them (from optim.lr and the run length).
// No defaults here: the config table is the only place they live.
struct ScheduleSpec {
  ScheduleType type = ScheduleType::constant;
  float base_lr = 0;  // optim.lr; the peak for onecycle
  std::int64_t warmup_steps = 0;
  std::int64_t total_steps = 0;  // cosine, onecycle (and the warm-up's cap); the run's length
  std::int64_t step_size = 0;    // step
  float gamma = 0;               // step
  float min_lr = 0;              // cosine
  float pct_start = 0;           // onecycle
  float div_factor = 0;          // onecycle
  float final_div_factor = 0;    // onecycle
};

class LrSchedule {
 public:
  // Validates the fields spec.type uses; throws ConfigError naming the key. A warm-up longer
  // than the run (total_steps > 0) is cut to the run's length, and warning() says so.
  explicit LrSchedule(ScheduleSpec spec);

  float lr(std::int64_t step) const;  // step >= 0
  float operator()(std::int64_t step) const { return lr(step); }
  const ScheduleSpec& spec() const { return spec_; }
  // Empty, or what the constructor changed (the truncated warm-up): log it on rank 0.
  const std::string& warning() const { return warning_; }

 private:
  double after_warmup(std::int64_t s) const;
  double onecycle(std::int64_t step) const;

  ScheduleSpec spec_;
  std::string warning_;
};

}  // namespace trellis
