// LayerNorm over the features of each row (token), PyTorch's nn.LayerNorm(d, eps).
//
//   x [n, d]   gamma "<name>.weight" [d] = 1, beta "<name>.bias" [d] = 0 (neither decays)
//   y [n, d]
// forward:   y = (x - mean_r) * rstd_r * gamma + beta,  rstd_r = 1 / sqrt(var_r + eps), var
//            biased; mean_r and rstd_r are kept per row for backward
// backward:  dx = rstd_r (g - mean(g) - xhat mean(g xhat)),  g = dy gamma      (=)
//            dgamma += sum_r dy xhat,  dbeta += sum_r dy                       (+=)
// See kernels/layernorm.hpp for the kernels (deterministic column sums).
#pragma once

#include "trellis/core/kokkos_types.hpp"
#include "trellis/nn/layer.hpp"
#include "trellis/nn/parameter_store.hpp"

#include <cstddef>
#include <string>

namespace trellis::nn {

class LayerNorm : public Layer {
 public:
  LayerNorm(ParameterStore& store, const std::string& name, int d, int capacity_rows,
            float eps = 1e-5f);

  void forward(ConstMatrix input, int n, const StepContext& ctx) override;
  void backward(ConstMatrix output_grad, int n) override;

  float eps() const { return eps_; }
  std::size_t weight_index() const { return weight_; }
  std::size_t bias_index() const { return bias_; }

 private:
  ParameterStore* store_;
  float eps_;
  std::size_t weight_, bias_;
  FloatView mean_, rstd_;  // [capacity]: the last forward's row statistics
};

}  // namespace trellis::nn
