// SGD with optional momentum (dampening 0), Nesterov and coupled L2 weight decay,
// as torch.optim.SGD:
//   g = grad + wd * p                       (where the decay mask is set)
//   buf = momentum * buf + g                (buf starts at the first g)
//   g = nesterov ? g + momentum * buf : buf (when momentum != 0)
//   p = p - lr * g
#pragma once

#include "trellis/optim/optimizer.hpp"

namespace trellis {

class Sgd final : public Optimizer {
 public:
  // Uses spec.momentum, spec.nesterov, spec.weight_decay. decay_mask is [numel].
  Sgd(const OptimizerSpec& spec, std::size_t numel, ConstMaskView decay_mask);

  std::string name() const override { return "sgd"; }
  NamedState state() override;  // {"momentum_buffer"} with momentum, else empty
  void update(FloatView params, ConstFloatView grads, float lr, float grad_scale, std::size_t begin,
              std::size_t end) override;

 private:
  float momentum_, weight_decay_;
  bool nesterov_;
  FloatView momentum_buffer_;                 // [numel] when momentum != 0, else unallocated
  std::string label_ = "trellis::sgd::step";  // kept: a temporary would allocate every step
};

}  // namespace trellis
