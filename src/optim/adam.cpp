#include "trellis/optim/adam.hpp"

#include "trellis/core/math.hpp"

#include <cmath>

namespace trellis {

Adam::Adam(const OptimizerSpec& spec, Decay decay, std::size_t numel, ConstFloatView decay_mask)
    : Optimizer(numel, decay_mask),
      beta1_(spec.beta1),
      beta2_(spec.beta2),
      eps_(spec.eps),
      weight_decay_(spec.weight_decay),
      decay_(decay),
      exp_avg_("trellis::adam::exp_avg", numel),
      exp_avg_sq_("trellis::adam::exp_avg_sq", numel),
      label_(decay == Decay::decoupled ? "trellis::adamw::step" : "trellis::adam::step") {}

NamedState Adam::state() { return {{"exp_avg", exp_avg_}, {"exp_avg_sq", exp_avg_sq_}}; }

void Adam::update(FloatView params, ConstFloatView grads, float lr, std::size_t begin,
                  std::size_t end) {
  // Scalars in double on the host, then rounded once to float, as torch computes its Python
  // scalars before handing them to the float kernels.
  const double t = static_cast<double>(step_count_);
  const double bias_correction1 = 1.0 - std::pow(static_cast<double>(beta1_), t);
  const double bias_correction2 = 1.0 - std::pow(static_cast<double>(beta2_), t);
  const float step_size = static_cast<float>(lr / bias_correction1);
  const float bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  const float one_minus_beta1 = static_cast<float>(1.0 - beta1_);
  const float one_minus_beta2 = static_cast<float>(1.0 - beta2_);
  const float keep = static_cast<float>(1.0 - static_cast<double>(lr) * weight_decay_);

  const ConstFloatView mask = decay_mask_;
  const FloatView m = exp_avg_, v = exp_avg_sq_;
  const float beta2 = beta2_, eps = eps_, wd = weight_decay_;
  const bool decoupled = decay_ == Decay::decoupled;
  Kokkos::parallel_for(
      label_, Kokkos::RangePolicy<ExecSpace>(begin, end), KOKKOS_LAMBDA(const std::size_t i) {
        float p = params(i), g = grads(i);
        if (mask(i) != 0.0f) {
          if (decoupled)
            p *= keep;
          else
            g += wd * p;
        }
        const float mi = m(i) + one_minus_beta1 * (g - m(i));  // torch's lerp_
        const float vi = beta2 * v(i) + one_minus_beta2 * g * g;
        m(i) = mi;
        v(i) = vi;
        const float denom = math::sqrt(vi) / bias_correction2_sqrt + eps;
        params(i) = p - step_size * (mi / denom);
      });
}

}  // namespace trellis
