// RMSProp as torch.optim.RMSprop (not centered), eps outside the square root:
//   g = grad + wd * p                    (where the decay mask is set)
//   v = alpha * v + (1 - alpha) * g * g
//   momentum > 0:  buf = momentum * buf + g / (sqrt(v) + eps);  p = p - lr * buf
//   otherwise:     p = p - lr * g / (sqrt(v) + eps)
#pragma once

#include "trellis/optim/optimizer.hpp"

namespace trellis {

class RmsProp final : public Optimizer {
 public:
  // Uses spec.alpha, spec.eps, spec.momentum, spec.weight_decay. decay_mask is [numel].
  RmsProp(const OptimizerSpec& spec, std::size_t numel, ConstMaskView decay_mask);

  std::string name() const override { return "rmsprop"; }
  NamedState state() override;  // {"square_avg"} plus "momentum_buffer" with momentum
  void update(FloatView params, ConstFloatView grads, float lr, float grad_scale, std::size_t begin,
              std::size_t end) override;

 private:
  float alpha_, eps_, momentum_, weight_decay_;
  FloatView square_avg_;                          // [numel]
  FloatView momentum_buffer_;                     // [numel] when momentum > 0, else unallocated
  std::string label_ = "trellis::rmsprop::step";  // kept: a temporary would allocate every step
};

}  // namespace trellis
