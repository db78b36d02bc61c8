// The GPT's output head: logits = x W^T with W the token table ("tied": the embedding's table,
// or the last pipeline stage's copy of it; registered by the Gpt, no bias).
//   x [n, d]           ln_f's output
//   W [V/tp, d]        this rank's vocabulary rows (store index weight_index())
//   logits [n, V/tp]   output()
// backward: dW += dl^T x;  dx = dl W, summed over the tp ranks' vocabulary slices.
// Mixed precision as Linear: x and dl are rounded into operand buffers kept between forward
// and backward, the GEMMs read W's compute copy, logits and dx are rounded in place.
#pragma once

#include "trellis/nn/autocast.hpp"
#include "trellis/nn/layer.hpp"
#include "trellis/nn/parameter_store.hpp"
#include "trellis/nn/tensor_parallel.hpp"

#include <memory>
#include <string>

namespace trellis::nn {

class TiedHead : public Layer {
 public:
  TiedHead(ParameterStore& store, const std::string& name, std::size_t weight_index, int d_model,
           int local_vocab, int capacity_rows, TensorParallel tp);

  void forward(ConstMatrix input, int n, const StepContext& ctx) override;
  void backward(ConstMatrix output_grad, int n) override;
  std::int64_t flops_per_sample() const override;  // 6 * d * V/tp per row

  std::size_t weight_index() const { return weight_; }
  bool split() const { return tp_.active(); }

 private:
  ParameterStore* store_;
  std::size_t weight_;
  TensorParallel tp_;
  AutocastOperand x16_;   // [cap * d] x rounded, autocast only
  AutocastOperand dl16_;  // [cap * V/tp] dl rounded, autocast only
};

}  // namespace trellis::nn
