#include "trellis/optim/loss_scaler.hpp"

#include "trellis/core/error.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace trellis {

LossScaler::LossScaler(const LossScaleSpec& spec) : spec_(spec) {
  const auto require = [](bool ok, const std::string& what) {
    if (!ok) throw ConfigError("loss scaling: " + what);
  };
  if (spec_.enabled) {
    require(std::isfinite(spec_.initial_scale) && spec_.initial_scale > 0,
            "precision.loss_scale must be positive and finite");
    require(spec_.growth_factor > 1, "precision.growth_factor must be > 1");
    require(spec_.backoff_factor > 0 && spec_.backoff_factor < 1,
            "precision.backoff_factor must lie in (0, 1)");
    require(spec_.growth_interval >= 1, "precision.growth_interval must be >= 1");
    require(spec_.hysteresis >= 1, "precision.hysteresis must be >= 1");
    require(spec_.min_scale > 0 && spec_.min_scale <= spec_.initial_scale,
            "precision.min_scale must lie in (0, initial scale]");
  }
  state_.scale = spec_.enabled ? spec_.initial_scale : 1.0f;
  state_.hysteresis_left = spec_.hysteresis;
}

bool LossScaler::update(bool overflow) {
  if (!dynamic()) return false;
  if (overflow) {
    const bool counted = !at_minimum();
    if (counted) ++state_.overflows;
    state_.growth_tracker = 0;
    state_.hysteresis_left = std::max<std::int64_t>(state_.hysteresis_left - 1, 0);
    if (state_.hysteresis_left == 0)
      state_.scale = std::max(state_.scale * spec_.backoff_factor, spec_.min_scale);
    return counted;
  }
  if (++state_.growth_tracker == spec_.growth_interval) {
    state_.growth_tracker = 0;
    state_.hysteresis_left = spec_.hysteresis;
    state_.scale *= spec_.growth_factor;
  }
  return false;
}

void LossScaler::restore(const State& state) {
  if (!(std::isfinite(state.scale) && state.scale > 0) || state.growth_tracker < 0 ||
      state.hysteresis_left < 0 || state.overflows < 0)
    throw Error("loss scaler state from the checkpoint is invalid: scale " +
                std::to_string(state.scale) + ", growth tracker " +
                std::to_string(state.growth_tracker) + ", hysteresis left " +
                std::to_string(state.hysteresis_left) +
                " (expected a positive finite scale and non-negative counters)");
  if (!spec_.enabled) return;
  state_ = state;
}

}  // namespace trellis
