#include "trellis/optim/optimizer.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/name_table.hpp"
#include "trellis/optim/adam.hpp"
#include "trellis/optim/rmsprop.hpp"
#include "trellis/optim/sgd.hpp"

namespace trellis {

Optimizer::Optimizer(std::size_t numel, ConstMaskView decay_mask)
    : numel_(numel), decay_mask_(decay_mask) {
  TRELLIS_REQUIRE(decay_mask.extent(0) == numel,
                  "decay mask has " + std::to_string(decay_mask.extent(0)) +
                      " elements, optimizer has " + std::to_string(numel));
  const auto host = Kokkos::create_mirror_view_and_copy(HostSpace(), decay_mask);
  for (std::size_t i = 0; i < numel; ++i) {
    const bool decay = host(i) != 0;
    if (decay_runs_.empty() || decay_runs_.back().decay != decay)
      decay_runs_.push_back(DecayRun{i, i + 1, decay});
    else
      decay_runs_.back().end = i + 1;
  }
}

void Optimizer::step(FloatView params, ConstFloatView grads, float lr, float grad_scale,
                     std::size_t begin, std::size_t end) {
  // Messages are built only on failure, so the check costs no allocation per step.
  TRELLIS_REQUIRE(params.extent(0) == numel_, "params has " + std::to_string(params.extent(0)) +
                                                  " elements, optimizer " + std::to_string(numel_));
  TRELLIS_REQUIRE(grads.extent(0) == numel_, "grads has " + std::to_string(grads.extent(0)) +
                                                 " elements, optimizer " + std::to_string(numel_));
  TRELLIS_REQUIRE(begin <= end && end <= numel_, "range [" + std::to_string(begin) + ", " +
                                                     std::to_string(end) + ") outside [0, " +
                                                     std::to_string(numel_) + ")");
  ++step_count_;
  update(params, grads, lr, grad_scale, begin, end);
}

void Optimizer::step(const std::vector<ParamWindow>& windows, ConstFloatView grads, float lr,
                     float grad_scale) {
  TRELLIS_REQUIRE(grads.extent(0) == numel_, "grads has " + std::to_string(grads.extent(0)) +
                                                 " elements, optimizer " + std::to_string(numel_));
  std::size_t covered = 0;
  for (const ParamWindow& w : windows) {
    TRELLIS_REQUIRE(w.begin == covered && w.begin <= w.end && w.params.extent(0) >= w.end,
                    "parameter window [" + std::to_string(w.begin) + ", " + std::to_string(w.end) +
                        ") does not continue at " + std::to_string(covered));
    covered = w.end;
  }
  TRELLIS_REQUIRE(covered == numel_, "parameter windows cover " + std::to_string(covered) + " of " +
                                         std::to_string(numel_) + " elements");
  ++step_count_;
  for (const ParamWindow& w : windows) update(w.params, grads, lr, grad_scale, w.begin, w.end);
}

void Optimizer::set_step_count(std::int64_t count) {
  TRELLIS_REQUIRE(count >= 0, "negative step count " + std::to_string(count));
  step_count_ = count;
}

namespace {

// `!(x >= lo)` rather than `x < lo` so that NaN fails too.
void require_at_least(float value, float lo, const char* key) {
  if (!(value >= lo))
    throw ConfigError(std::string(key) + " must be >= " + std::to_string(lo) + ", got " +
                      std::to_string(value));
}

void require_unit_interval(float value, const char* key) {  // [0, 1)
  if (!(value >= 0.0f && value < 1.0f))
    throw ConfigError(std::string(key) + " must be in [0, 1), got " + std::to_string(value));
}

}  // namespace

const std::vector<std::pair<const char*, OptimizerType>>& optimizer_type_names() {
  static const std::vector<std::pair<const char*, OptimizerType>> names = {
      {"sgd", OptimizerType::sgd},
      {"adam", OptimizerType::adam},
      {"adamw", OptimizerType::adamw},
      {"rmsprop", OptimizerType::rmsprop}};
  return names;
}

const char* optimizer_type_name(OptimizerType type) {
  return name_in(optimizer_type_names(), type);
}

OptimizerType parse_optimizer_type(const std::string& name) {
  OptimizerType type{};
  if (!find_name(optimizer_type_names(), name, type))
    throw ConfigError("optim.type: unknown optimizer '" + name +
                      "' (allowed: " + name_list(optimizer_type_names()) + ")");
  return type;
}

void validate_optimizer_spec(const OptimizerSpec& spec) {
  using T = OptimizerType;
  const T type = spec.type;
  require_at_least(spec.weight_decay, 0.0f, "optim.weight_decay");
  if (type == T::sgd || type == T::rmsprop) require_at_least(spec.momentum, 0.0f, "optim.momentum");
  if (type == T::sgd && spec.nesterov && !(spec.momentum > 0.0f))
    throw ConfigError("optim.nesterov needs optim.momentum > 0");
  if (type == T::adam || type == T::adamw) {
    require_unit_interval(spec.beta1, "optim.beta1");
    require_unit_interval(spec.beta2, "optim.beta2");
  }
  if (type != T::sgd) require_at_least(spec.eps, 0.0f, "optim.eps");
  if (type == T::rmsprop) require_unit_interval(spec.alpha, "optim.alpha");
}

int optimizer_state_buffers(const OptimizerSpec& spec) {
  switch (spec.type) {
    case OptimizerType::adam:
    case OptimizerType::adamw:
      return 2;  // exp_avg, exp_avg_sq
    case OptimizerType::rmsprop:
      return spec.momentum > 0 ? 2 : 1;  // square_avg (+ momentum_buffer)
    case OptimizerType::sgd:
      break;
  }
  return spec.momentum > 0 ? 1 : 0;  // momentum_buffer
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerSpec& spec, std::size_t numel,
                                          ConstMaskView decay_mask) {
  validate_optimizer_spec(spec);
  if (spec.type == OptimizerType::sgd) return std::make_unique<Sgd>(spec, numel, decay_mask);
  if (spec.type == OptimizerType::rmsprop)
    return std::make_unique<RmsProp>(spec, numel, decay_mask);
  const auto decay =
      spec.type == OptimizerType::adamw ? Adam::Decay::decoupled : Adam::Decay::coupled;
  return std::make_unique<Adam>(spec, decay, numel, decay_mask);
}

}  // namespace trellis
