// Learning-rate schedules: lr as a pure function of the 0-based step, so a resumed run needs
// no scheduler state beyond the step count.
//
// Warm-up (all types but onecycle), W = warmup_steps:
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

namespace trellis {

// Config keys: sched.type, optim.lr (base_lr), sched.warmup_steps, sched.step_size,
// sched.gamma, sched.min_lr, sched.pct_start, sched.div_factor, sched.final_div_factor.
// Defaults for the onecycle fields are torch's.
struct ScheduleSpec {
  std::string type = "constant";  // "constant" | "step" | "cosine" | "onecycle"
  float base_lr = 1e-3f;          // optim.lr; the peak for onecycle
  std::int64_t warmup_steps = 0;
  std::int64_t total_steps = 0;   // cosine, onecycle; set by the trainer, not a config key
  std::int64_t step_size = 0;     // step
  float gamma = 0.1f;             // step
  float min_lr = 0.0f;            // cosine
  float pct_start = 0.3f;         // onecycle
  float div_factor = 25.0f;       // onecycle
  float final_div_factor = 1e4f;  // onecycle
};

class LrSchedule {
 public:
  // Validates the fields spec.type uses; throws ConfigError naming the key.
  explicit LrSchedule(ScheduleSpec spec);

  float lr(std::int64_t step) const;  // step >= 0
  float operator()(std::int64_t step) const { return lr(step); }
  const ScheduleSpec& spec() const { return spec_; }

 private:
  enum class Kind { constant, step, cosine, onecycle };
  double after_warmup(std::int64_t s) const;
  double onecycle(std::int64_t step) const;

  ScheduleSpec spec_;
  Kind kind_;
};

}  // namespace trellis
