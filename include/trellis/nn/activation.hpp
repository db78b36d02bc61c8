// Element-wise activation layers: in_features == out_features == features.
//
//   x [n, features] -> y [n, features]
//   backward: dx = dy * f'(x) written (=), computed from the saved input x; no parameters.
#pragma once

#include "trellis/nn/layer.hpp"

#include <string>

namespace trellis::nn {

// y = max(x, 0); dx = dy * [x > 0].
class Relu : public Layer {
 public:
  Relu(const std::string& name, int features, int capacity);
  void forward(ConstMatrix input, int n, const StepContext& ctx) override;
  void backward(ConstMatrix output_grad, int n) override;
};

// Exact (erf) GELU like PyTorch's default: y = x * Phi(x); dx = dy * (Phi(x) + x phi(x)).
class Gelu : public Layer {
 public:
  Gelu(const std::string& name, int features, int capacity);
  void forward(ConstMatrix input, int n, const StepContext& ctx) override;
  void backward(ConstMatrix output_grad, int n) override;
};

}  // namespace trellis::nn
