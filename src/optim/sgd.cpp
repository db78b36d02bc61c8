#include "trellis/optim/sgd.hpp"

#include "host_loops.hpp"

namespace trellis {

namespace {

using optim_detail::kHostKernels;

struct SgdScalars {
  float lr, grad_scale, weight_decay, momentum;
};

// One element's update; the flags are compile-time so each host loop is branch-free.
template <bool kDecay, bool kMomentum, bool kNesterov>
TRELLIS_HOST_INLINE void sgd_run(float* __restrict p, const float* __restrict grad,
                                 float* __restrict buf, std::size_t n, const SgdScalars s) {
  for (std::size_t i = 0; i < n; ++i) {
    float g = grad[i] * s.grad_scale;
    if constexpr (kDecay) g += s.weight_decay * p[i];
    if constexpr (kMomentum) {
      const float b = s.momentum * buf[i] + g;
      buf[i] = b;
      g = kNesterov ? g + s.momentum * b : b;
    }
    p[i] -= s.lr * g;
  }
}

// p, grad, buf: one decay run's [n] elements (buf nullptr without momentum).
TRELLIS_HOST_CLONES
void sgd_host(float* __restrict p, const float* __restrict grad, float* __restrict buf,
              std::size_t n, const SgdScalars s, bool decay, bool momentum, bool nesterov) {
  if (!momentum) {
    if (decay)
      sgd_run<true, false, false>(p, grad, buf, n, s);
    else
      sgd_run<false, false, false>(p, grad, buf, n, s);
  } else if (!nesterov) {
    if (decay)
      sgd_run<true, true, false>(p, grad, buf, n, s);
    else
      sgd_run<false, true, false>(p, grad, buf, n, s);
  } else {
    if (decay)
      sgd_run<true, true, true>(p, grad, buf, n, s);
    else
      sgd_run<false, true, true>(p, grad, buf, n, s);
  }
}

}  // namespace

Sgd::Sgd(const OptimizerSpec& spec, std::size_t numel, ConstMaskView decay_mask)
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

void Sgd::update(FloatView params, ConstFloatView grads, float lr, float grad_scale,
                 std::size_t begin, std::size_t end) {
  // The buffer starts at zero, so the first step gives buf = g exactly: the same as torch
  // initialising it to a copy of the first gradient (dampening is 0).
  const SgdScalars s{lr, grad_scale, weight_decay_, momentum_};
  const bool use_momentum = momentum_ != 0.0f, nesterov = nesterov_;
  if constexpr (kHostKernels) {
    for_each_decay_run(begin, end, [&](std::size_t lo, std::size_t hi, bool decay) {
      sgd_host(params.data() + lo, grads.data() + lo, optim_detail::at(momentum_buffer_, lo),
               hi - lo, s, decay, use_momentum, nesterov);
    });
  } else {
    // Locals, not members: a device lambda must not capture `this`.
    const ConstMaskView mask = decay_mask_;
    const FloatView buf = momentum_buffer_;
    Kokkos::parallel_for(
        label_, Kokkos::RangePolicy<ExecSpace>(begin, end), KOKKOS_LAMBDA(const std::size_t i) {
          float g = grads(i) * s.grad_scale;
          if (mask(i) != 0) g += s.weight_decay * params(i);
          if (use_momentum) {
            const float b = s.momentum * buf(i) + g;
            buf(i) = b;
            g = nesterov ? g + s.momentum * b : b;
          }
          params(i) -= s.lr * g;
        });
  }
}

}  // namespace trellis
