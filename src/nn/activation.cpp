#include "trellis/nn/activation.hpp"

#include "trellis/kernels/activation.hpp"

namespace trellis::nn {

Relu::Relu(const std::string& name, int features, int capacity)
    : Layer(name, features, features, capacity) {}

void Relu::forward(ConstMatrix input, int n, const StepContext&) {
  kernels::relu_forward(begin_forward(input, n), output_rows(n));
}

void Relu::backward(ConstMatrix output_grad, int n) {
  kernels::relu_backward(saved_input(), begin_backward(output_grad, n), input_grad_rows(n));
}

Gelu::Gelu(const std::string& name, int features, int capacity)
    : Layer(name, features, features, capacity) {}

void Gelu::forward(ConstMatrix input, int n, const StepContext&) {
  kernels::gelu_forward(begin_forward(input, n), output_rows(n));
}

void Gelu::backward(ConstMatrix output_grad, int n) {
  kernels::gelu_backward(saved_input(), begin_backward(output_grad, n), input_grad_rows(n));
}

}  // namespace trellis::nn
