#include "trellis/optim/rmsprop.hpp"

#include "host_loops.hpp"
#include "trellis/core/math.hpp"

#include <cmath>

namespace trellis {

namespace {

using optim_detail::kHostKernels;

struct RmsPropScalars {
  float lr, grad_scale, weight_decay, alpha, one_minus_alpha, eps, momentum;
};

template <bool kDecay, bool kMomentum>
TRELLIS_HOST_INLINE void rmsprop_run(float* __restrict p, const float* __restrict grad,
                                     float* __restrict v, float* __restrict buf, std::size_t n,
                                     const RmsPropScalars s) {
  for (std::size_t i = 0; i < n; ++i) {
    float g = grad[i] * s.grad_scale;
    if constexpr (kDecay) g += s.weight_decay * p[i];
    const float vi = s.alpha * v[i] + s.one_minus_alpha * g * g;
    v[i] = vi;
    const float avg = __builtin_sqrtf(vi) + s.eps;
    if constexpr (kMomentum) {
      const float b = s.momentum * buf[i] + g / avg;
      buf[i] = b;
      p[i] -= s.lr * b;
    } else {
      p[i] -= s.lr * (g / avg);
    }
  }
}

// One decay run's [n] elements (buf nullptr without momentum).
TRELLIS_HOST_CLONES
void rmsprop_host(float* __restrict p, const float* __restrict grad, float* __restrict v,
                  float* __restrict buf, std::size_t n, const RmsPropScalars s, bool decay,
                  bool momentum) {
  if (momentum) {
    if (decay)
      rmsprop_run<true, true>(p, grad, v, buf, n, s);
    else
      rmsprop_run<false, true>(p, grad, v, buf, n, s);
  } else {
    if (decay)
      rmsprop_run<true, false>(p, grad, v, buf, n, s);
    else
      rmsprop_run<false, false>(p, grad, v, buf, n, s);
  }
}

}  // namespace

RmsProp::RmsProp(const OptimizerSpec& spec, std::size_t numel, ConstMaskView decay_mask)
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

void RmsProp::update(FloatView params, ConstFloatView grads, float lr, float grad_scale,
                     std::size_t begin, std::size_t end) {
  const RmsPropScalars s{lr,   grad_scale, weight_decay_, alpha_, static_cast<float>(1.0 - alpha_),
                         eps_, momentum_};
  const bool use_momentum = momentum_ > 0.0f;
  if constexpr (kHostKernels) {
    for_each_decay_run(begin, end, [&](std::size_t lo, std::size_t hi, bool decay) {
      rmsprop_host(params.data() + lo, grads.data() + lo, square_avg_.data() + lo,
                   optim_detail::at(momentum_buffer_, lo), hi - lo, s, decay, use_momentum);
    });
  } else {
    // Locals, not members: a device lambda must not capture `this`.
    const ConstMaskView mask = decay_mask_;
    const FloatView v = square_avg_, buf = momentum_buffer_;
    Kokkos::parallel_for(
        label_, Kokkos::RangePolicy<ExecSpace>(begin, end), KOKKOS_LAMBDA(const std::size_t i) {
          float g = grads(i) * s.grad_scale;
          if (mask(i) != 0) g += s.weight_decay * params(i);
          const float vi = s.alpha * v(i) + s.one_minus_alpha * g * g;
          v(i) = vi;
          const float avg = math::sqrt(vi) + s.eps;
          if (use_momentum) {
            const float b = s.momentum * buf(i) + g / avg;
            buf(i) = b;
            params(i) -= s.lr * b;
          } else {
            params(i) -= s.lr * (g / avg);
          }
        });
  }
}

}  // namespace trellis
