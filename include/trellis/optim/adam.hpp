// Adam with coupled L2 decay (torch.optim.Adam) and AdamW with decoupled decay
// (torch.optim.AdamW), in one class because they differ only in where decay enters.
// At step t (1-based):
//   adam:  g = grad + wd * p               adamw: p = p * (1 - lr * wd)
//   m = m + (1 - beta1) * (g - m)          v = beta2 * v + (1 - beta2) * g * g
//   p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// Decay (either kind) applies only where the decay mask is set.
#pragma once

#include "trellis/optim/optimizer.hpp"

namespace trellis {

class Adam final : public Optimizer {
 public:
  enum class Decay { coupled, decoupled };  // adam, adamw

  // Uses spec.beta1, spec.beta2, spec.eps, spec.weight_decay. decay_mask is [numel].
  Adam(const OptimizerSpec& spec, Decay decay, std::size_t numel, ConstMaskView decay_mask);

  std::string name() const override { return decay_ == Decay::decoupled ? "adamw" : "adam"; }
  NamedState state() override;  // {"exp_avg", "exp_avg_sq"}
  void update(FloatView params, ConstFloatView grads, float lr, float grad_scale, std::size_t begin,
              std::size_t end) override;

 private:
  float beta1_, beta2_, eps_, weight_decay_;
  Decay decay_;
  FloatView exp_avg_;     // [numel] first moment m
  FloatView exp_avg_sq_;  // [numel] second moment v
  std::string label_;     // kept: a temporary would allocate every step
};

}  // namespace trellis
