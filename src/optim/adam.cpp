#include "trellis/optim/adam.hpp"

#include "host_loops.hpp"
#include "trellis/core/math.hpp"

#include <cmath>

namespace trellis {

namespace {

using optim_detail::kHostKernels;

// Per-step scalars, computed once on the host.
struct AdamScalars {
  float grad_scale, weight_decay, keep;  // keep = 1 - lr * wd (decoupled decay)
  float one_minus_beta1, beta2, one_minus_beta2, eps;
  float step_size, bias_correction2_sqrt;  // lr / (1 - beta1^t), sqrt(1 - beta2^t)
};

template <bool kDecay, bool kDecoupled>
TRELLIS_HOST_INLINE void adam_run(float* __restrict p, const float* __restrict grad,
                                  float* __restrict m, float* __restrict v, std::size_t n,
                                  const AdamScalars s) {
  for (std::size_t i = 0; i < n; ++i) {
    float pi = p[i], g = grad[i] * s.grad_scale;
    if constexpr (kDecay) {
      if constexpr (kDecoupled)
        pi *= s.keep;
      else
        g += s.weight_decay * pi;
    }
    const float mi = m[i] + s.one_minus_beta1 * (g - m[i]);  // torch's lerp_
    const float vi = s.beta2 * v[i] + s.one_minus_beta2 * g * g;
    m[i] = mi;
    v[i] = vi;
    const float denom = __builtin_sqrtf(vi) / s.bias_correction2_sqrt + s.eps;
    p[i] = pi - s.step_size * (mi / denom);
  }
}

// One decay run's [n] elements of params, grads and both moments.
TRELLIS_HOST_CLONES
void adam_host(float* __restrict p, const float* __restrict grad, float* __restrict m,
               float* __restrict v, std::size_t n, const AdamScalars s, bool decay,
               bool decoupled) {
  if (!decay)
    adam_run<false, false>(p, grad, m, v, n, s);
  else if (decoupled)
    adam_run<true, true>(p, grad, m, v, n, s);
  else
    adam_run<true, false>(p, grad, m, v, n, s);
}

}  // namespace

Adam::Adam(const OptimizerSpec& spec, Decay decay, std::size_t numel, ConstMaskView decay_mask)
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

void Adam::update(FloatView params, ConstFloatView grads, float lr, float grad_scale,
                  std::size_t begin, std::size_t end) {
  // Scalars in double on the host, then rounded once to float, as torch computes its Python
  // scalars before handing them to the float kernels.
  const double t = static_cast<double>(step_count_);
  const double bias_correction1 = 1.0 - std::pow(static_cast<double>(beta1_), t);
  const double bias_correction2 = 1.0 - std::pow(static_cast<double>(beta2_), t);
  AdamScalars s{};
  s.grad_scale = grad_scale;
  s.weight_decay = weight_decay_;
  s.keep = static_cast<float>(1.0 - static_cast<double>(lr) * weight_decay_);
  s.one_minus_beta1 = static_cast<float>(1.0 - beta1_);
  s.beta2 = beta2_;
  s.one_minus_beta2 = static_cast<float>(1.0 - beta2_);
  s.eps = eps_;
  s.step_size = static_cast<float>(lr / bias_correction1);
  s.bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  const bool decoupled = decay_ == Decay::decoupled;

  if constexpr (kHostKernels) {
    for_each_decay_run(begin, end, [&](std::size_t lo, std::size_t hi, bool decay) {
      adam_host(params.data() + lo, grads.data() + lo, exp_avg_.data() + lo,
                exp_avg_sq_.data() + lo, hi - lo, s, decay, decoupled);
    });
  } else {
    // Locals, not members: a device lambda must not capture `this`.
    const ConstMaskView mask = decay_mask_;
    const FloatView m = exp_avg_, v = exp_avg_sq_;
    Kokkos::parallel_for(
        label_, Kokkos::RangePolicy<ExecSpace>(begin, end), KOKKOS_LAMBDA(const std::size_t i) {
          float p = params(i), g = grads(i) * s.grad_scale;
          if (mask(i) != 0) {
            if (decoupled)
              p *= s.keep;
            else
              g += s.weight_decay * p;
          }
          const float mi = m(i) + s.one_minus_beta1 * (g - m(i));
          const float vi = s.beta2 * v(i) + s.one_minus_beta2 * g * g;
          m(i) = mi;
          v(i) = vi;
          const float denom = math::sqrt(vi) / s.bias_correction2_sqrt + s.eps;
          params(i) = p - s.step_size * (mi / denom);
        });
  }
}

}  // namespace trellis
