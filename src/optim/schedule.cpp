#include "trellis/optim/schedule.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/name_table.hpp"

#include <cmath>
#include <string>
#include <utility>

namespace trellis {

namespace {

constexpr double kPi = 3.14159265358979323846;

// total_steps is no config key of its own: the trainer derives it.
constexpr const char* kTotalSteps =
    "total steps (train.max_steps, or train.epochs x steps per epoch)";

double cos_anneal(double from, double to, double pct) {
  return to + (from - to) * 0.5 * (1.0 + std::cos(kPi * pct));
}

[[noreturn]] void bad(const std::string& key, const std::string& rule, const std::string& got) {
  throw ConfigError(key + " " + rule + ", got " + got);
}

// Comparisons are written so that NaN fails them.
void require_positive(double value, const char* key) {
  if (!(value > 0.0 && std::isfinite(value))) bad(key, "must be > 0", std::to_string(value));
}

}  // namespace

const std::vector<std::pair<const char*, ScheduleType>>& schedule_type_names() {
  static const std::vector<std::pair<const char*, ScheduleType>> names = {
      {"constant", ScheduleType::constant},
      {"step", ScheduleType::step},
      {"cosine", ScheduleType::cosine},
      {"onecycle", ScheduleType::onecycle}};
  return names;
}

const char* schedule_type_name(ScheduleType type) { return name_in(schedule_type_names(), type); }

ScheduleType parse_schedule_type(const std::string& name) {
  ScheduleType type{};
  if (!find_name(schedule_type_names(), name, type))
    throw ConfigError("sched.type: unknown schedule '" + name +
                      "' (allowed: " + name_list(schedule_type_names()) + ")");
  return type;
}

LrSchedule::LrSchedule(ScheduleSpec spec) : spec_(std::move(spec)) {
  const ScheduleSpec& s = spec_;
  if (!(s.base_lr >= 0.0f && std::isfinite(s.base_lr)))
    bad("optim.lr", "must be a finite value >= 0", std::to_string(s.base_lr));
  if (spec_.type != ScheduleType::onecycle && s.warmup_steps < 0)
    bad("sched.warmup_steps", "must be >= 0", std::to_string(s.warmup_steps));
  // A short run (train.max_steps) of a config tuned for a long one: ramp up over the whole
  // run rather than refuse it, and say so.
  if (spec_.type != ScheduleType::onecycle && s.total_steps > 0 && s.warmup_steps > s.total_steps) {
    warning_ = "sched.warmup_steps = " + std::to_string(s.warmup_steps) + " exceeds the run's " +
               std::to_string(s.total_steps) + " steps; warm-up cut to " +
               std::to_string(s.total_steps) + " steps";
    spec_.warmup_steps = s.total_steps;
  }

  switch (spec_.type) {
    case ScheduleType::constant:
      break;
    case ScheduleType::step:
      if (s.step_size <= 0) bad("sched.step_size", "must be > 0", std::to_string(s.step_size));
      require_positive(s.gamma, "sched.gamma");
      break;
    case ScheduleType::cosine:
      if (s.total_steps <= 0) bad(kTotalSteps, "must be > 0", std::to_string(s.total_steps));
      if (!(s.min_lr >= 0.0f && s.min_lr <= s.base_lr))
        bad("sched.min_lr", "must be in [0, optim.lr]", std::to_string(s.min_lr));
      break;
    case ScheduleType::onecycle:
      if (s.total_steps <= 0) bad(kTotalSteps, "must be > 0", std::to_string(s.total_steps));
      if (!(s.pct_start > 0.0f && s.pct_start < 1.0f))
        bad("sched.pct_start", "must be in (0, 1)", std::to_string(s.pct_start));
      // The warm phase ends at pct_start * total_steps - 1; at 0 torch divides 0 by 0.
      if (!(static_cast<double>(s.pct_start) * static_cast<double>(s.total_steps) > 1.0))
        bad("sched.pct_start", "times the total steps must exceed 1",
            std::to_string(s.pct_start) + " * " + std::to_string(s.total_steps));
      require_positive(s.div_factor, "sched.div_factor");
      require_positive(s.final_div_factor, "sched.final_div_factor");
      break;
  }
}

float LrSchedule::lr(std::int64_t step) const {
  TRELLIS_REQUIRE(step >= 0, "negative step " + std::to_string(step));
  if (spec_.type == ScheduleType::onecycle) return static_cast<float>(onecycle(step));
  const std::int64_t warmup = spec_.warmup_steps;
  if (step < warmup)
    return static_cast<float>(static_cast<double>(spec_.base_lr) * static_cast<double>(step + 1) /
                              static_cast<double>(warmup));
  return static_cast<float>(after_warmup(step - warmup));
}

double LrSchedule::after_warmup(std::int64_t s) const {
  const double base = spec_.base_lr;
  switch (spec_.type) {
    case ScheduleType::step:
      return base *
             std::pow(static_cast<double>(spec_.gamma), static_cast<double>(s / spec_.step_size));
    case ScheduleType::cosine: {
      const std::int64_t span = spec_.total_steps - spec_.warmup_steps;
      if (s >= span) return spec_.min_lr;
      return cos_anneal(base, spec_.min_lr, static_cast<double>(s) / static_cast<double>(span));
    }
    default:
      return base;
  }
}

double LrSchedule::onecycle(std::int64_t step) const {
  const double peak = spec_.base_lr;
  const double start = peak / spec_.div_factor;
  const double final_lr = start / spec_.final_div_factor;
  const double warm_end =
      static_cast<double>(spec_.pct_start) * static_cast<double>(spec_.total_steps) - 1.0;
  const double last = static_cast<double>(spec_.total_steps - 1);
  const double x = static_cast<double>(step);
  if (x <= warm_end) return cos_anneal(start, peak, x / warm_end);
  if (x >= last) return final_lr;
  return cos_anneal(peak, final_lr, (x - warm_end) / (last - warm_end));
}

}  // namespace trellis
