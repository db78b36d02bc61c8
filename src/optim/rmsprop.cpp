#include "trellis/optim/rmsprop.hpp"

#include "trellis/core/math.hpp"

namespace trellis {

RmsProp::RmsProp(const OptimizerSpec& spec, std::size_t numel, ConstFloatView decay_mask)
    : Optimizer(numel, decay_mask),
      alpha_(spec.alpha),
      eps_(spec.eps),
      momentum_(spec.momentum),
      weight_decay_(spec.weight_decay),
      square_avg_("trellis::rmsprop::square_avg", numel) {
  if (momentum_ > 0.0f) momentum_buffer_ = FloatView("trellis::rmsprop::momentum_buffer", numel);
}

NamedState RmsProp::state() {
  NamedState named{{"square_avg", square_avg_}};
  if (momentum_ > 0.0f) named.emplace_back("momentum_buffer", momentum_buffer_);
  return named;
}

void RmsProp::update(FloatView params, ConstFloatView grads, float lr, std::size_t begin,
                     std::size_t end) {
  // Locals, not members: a device lambda must not capture `this`.
  const ConstFloatView mask = decay_mask_;
  const FloatView v = square_avg_, buf = momentum_buffer_;
  const float alpha = alpha_, one_minus_alpha = static_cast<float>(1.0 - alpha_);
  const float eps = eps_, momentum = momentum_, wd = weight_decay_;
  const bool use_momentum = momentum_ > 0.0f;
  Kokkos::parallel_for(
      label_, Kokkos::RangePolicy<ExecSpace>(begin, end), KOKKOS_LAMBDA(const std::size_t i) {
        float g = grads(i);
        if (mask(i) != 0.0f) g += wd * params(i);
        const float vi = alpha * v(i) + one_minus_alpha * g * g;
        v(i) = vi;
        const float avg = math::sqrt(vi) + eps;
        if (use_momentum) {
          const float b = momentum * buf(i) + g / avg;
          buf(i) = b;
          params(i) -= lr * b;
        } else {
          params(i) -= lr * (g / avg);
        }
      });
}

}  // namespace trellis
