// Loss scaling for fp16 training: the loss (so every gradient) is multiplied by S before
// backward, so that small gradients survive fp16's narrow range, and divided by S again where
// the optimizer reads them (the division rides in the update's gradient multiplier, no pass of
// its own). A dynamic scaler finds the largest S that does not overflow:
//
//   overflow (a non-finite loss or gradient, agreed over every rank): the step is skipped,
//     the growth count restarts, and after `hysteresis` such steps since the last growth (or
//     the start) S := max(S x backoff_factor, min_scale)
//   otherwise: after growth_interval clean steps in a row, S := S x growth_factor (and the
//     hysteresis allowance is restored)
//
// These are Megatron-LM's DynamicGradScaler semantics (DeepSpeed's DynamicLossScaler with
// its default consecutive_hysteresis = false is the same). Defaults here, and theirs:
//   Trellis       initial 2^16, growth 2, backoff 0.5, interval 1000, hysteresis 2, min 1
//   Megatron-LM   initial 2^32, growth 2, backoff 0.5, interval 1000, hysteresis 2, min 1
//   DeepSpeed     initial 2^16, growth 2, backoff 0.5, window 1000,   hysteresis 2, min 1
//   PyTorch GradScaler  init 2^16, growth 2, backoff 0.5, interval 2000, no hysteresis (1)
// A static scaler keeps S fixed; overflow steps are still skipped. bf16 has fp32's range and
// needs no scaling: S = 1 and the scaler is off.
//
// The state (S, clean steps since the last growth or overflow, hysteresis left, overflow
// steps so far) goes into
// checkpoints, so a resumed run scales exactly as an uninterrupted one.
#pragma once

#include <cstdint>

namespace trellis {

struct LossScaleSpec {
  bool enabled = false;  // false: S = 1 always (fp32, bf16)
  bool dynamic = true;   // false: S = initial_scale always
  float initial_scale = 65536.0f;
  float growth_factor = 2.0f;
  float backoff_factor = 0.5f;
  std::int64_t growth_interval = 1000;
  std::int64_t hysteresis = 2;
  float min_scale = 1.0f;
};

class LossScaler {
 public:
  struct State {
    float scale = 1.0f;
    std::int64_t growth_tracker = 0;  // clean steps since the last growth or overflow
    std::int64_t hysteresis_left = 0;
    std::int64_t overflows = 0;  // overflow steps so far (skipped while above the floor)
  };

  // ConfigError for factors or scales out of range (growth <= 1, backoff outside (0, 1), ...).
  explicit LossScaler(const LossScaleSpec& spec);

  bool enabled() const { return spec_.enabled; }
  bool dynamic() const { return spec_.enabled && spec_.dynamic; }
  float scale() const { return state_.scale; }
  // Whether S can back off no further: another overflow is then a real divergence.
  bool at_minimum() const { return !dynamic() || state_.scale <= spec_.min_scale; }

  // After each step's overflow check (the same on every rank). Returns whether the step was
  // a scaler overflow: overflowed while the scale could still back off (then counted in
  // state().overflows). Off or static: nothing, false.
  bool update(bool overflow);

  const State& state() const { return state_; }
  // From a checkpoint; Error for a non-positive or non-finite scale or negative counters.
  void restore(const State& state);

 private:
  LossScaleSpec spec_;
  State state_;
};

}  // namespace trellis
