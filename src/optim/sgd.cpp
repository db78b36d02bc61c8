#include "trellis/optim/sgd.hpp"

namespace trellis {

Sgd::Sgd(const OptimizerSpec& spec, std::size_t numel, ConstFloatView decay_mask)
    : Optimizer(numel, decay_mask),
      momentum_(spec.momentum),
      weight_decay_(spec.weight_decay),
      nesterov_(spec.nesterov) {
  if (momentum_ != 0.0f) momentum_buffer_ = FloatView("trellis::sgd::momentum_buffer", numel);
}

NamedState Sgd::state() {
  if (momentum_ == 0.0f) return {};
  return {{"momentum_buffer", momentum_buffer_}};
}

void Sgd::update(FloatView params, ConstFloatView grads, float lr, std::size_t begin,
                 std::size_t end) {
  // Locals, not members: a device lambda must not capture `this`.
  const ConstFloatView mask = decay_mask_;
  const FloatView buf = momentum_buffer_;
  const float wd = weight_decay_, momentum = momentum_;
  const bool use_momentum = momentum_ != 0.0f, nesterov = nesterov_;
  Kokkos::parallel_for(
      label_, Kokkos::RangePolicy<ExecSpace>(begin, end), KOKKOS_LAMBDA(const std::size_t i) {
        float g = grads(i);
        if (mask(i) != 0.0f) g += wd * params(i);
        if (use_momentum) {
          // The buffer starts at zero, so the first step gives buf = g exactly: the same as
          // torch initialising it to a copy of the first gradient (dampening is 0).
          const float b = momentum * buf(i) + g;
          buf(i) = b;
          g = nesterov ? g + momentum * b : b;
        }
        params(i) -= lr * g;
      });
}

}  // namespace trellis
