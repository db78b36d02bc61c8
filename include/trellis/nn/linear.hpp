// Linear: y = x W^T + b, PyTorch's nn.Linear convention.
//
//   x  [n, in]     W "<name>.weight" [out, in] (weight decay)     b "<name>.bias" [out] (no decay)
//   y  [n, out]
// forward:   y = x W^T + b                      one GEMM (A, B^T) + bias kernel
// backward:  dW += dy^T x    db += colsum(dy)   parameter grads accumulate (+=)
//            dx  = dy W                          input grad written (=)
// All three GEMMs use the row-major buffers as they are: no transposed copies.
#pragma once

#include "trellis/nn/layer.hpp"
#include "trellis/nn/parameter_store.hpp"

#include <cstddef>
#include <string>

namespace trellis::nn {

enum class LinearInit {
  kaiming,  // PyTorch nn.Linear default: W, b ~ U(-1/sqrt(in), 1/sqrt(in))
            // (kaiming_uniform with a = sqrt(5), i.e. gain 1/sqrt(3))
  xavier,   // W ~ xavier_uniform(in, out, gain 1), b = 0
};

// "kaiming" | "xavier"; anything else throws ConfigError.
LinearInit parse_linear_init(const std::string& name);

class Linear : public Layer {
 public:
  // Registers "<name>.weight" and "<name>.bias" in `store` (before store.finalize()); the store
  // must outlive the layer and be finalized before the first forward.
  Linear(ParameterStore& store, const std::string& name, int in_features, int out_features,
         int capacity, LinearInit init = LinearInit::kaiming);
  // The same with explicit initialisations (e.g. GPT-2's normal(0.02) weights, zero bias).
  Linear(ParameterStore& store, const std::string& name, int in_features, int out_features,
         int capacity, const InitSpec& weight_init, const InitSpec& bias_init);

  void forward(ConstMatrix input, int n, const StepContext& ctx) override;
  void backward(ConstMatrix output_grad, int n) override;
  // 2*in*out forward, 4*in*out backward (dW and dx GEMMs); bias terms ignored.
  std::int64_t flops_per_sample() const override;

  std::size_t weight_index() const { return weight_; }
  std::size_t bias_index() const { return bias_; }

 private:
  ParameterStore* store_;
  std::size_t weight_;  // index in store_
  std::size_t bias_;
};

}  // namespace trellis::nn
