// The GPT's output head: logits = x W^T with W the token table ("tied": the embedding's table,
// or the last pipeline stage's copy of it; registered by the Gpt, no bias).
//   x [n, d]           ln_f's output
//   W [V/tp, d]        this rank's vocabulary rows (store index weight_index())
//   logits [n, V/tp]   output()
// backward: dW += dl^T x;  dx = dl W, summed over the tp ranks' vocabulary slices.
// Mixed precision as Linear: x and dl are rounded into operand buffers kept between forward
// and backward, the GEMMs read W's compute copy, logits and dx are rounded in place.
//
// Int8 inference as Linear (nn/quantization.hpp): with an input observer forward shows it x
// (calibration); with an int8 kernel (W quantized per vocabulary row, a zero bias) forward
// quantizes x into the layer's bytes and runs the kernel, or forward_quantized_input runs it on
// bytes written there already (ln_f writing its output quantized). Single-rank vocabulary only.
#pragma once

#include "trellis/kernels/int8.hpp"
#include "trellis/nn/autocast.hpp"
#include "trellis/nn/layer.hpp"
#include "trellis/nn/parameter_store.hpp"
#include "trellis/nn/tensor_parallel.hpp"

#include <memory>
#include <string>

namespace trellis::nn {

class ActivationObserver;

class TiedHead : public Layer {
 public:
  TiedHead(ParameterStore& store, const std::string& name, std::size_t weight_index, int d_model,
           int local_vocab, int capacity_rows, TensorParallel tp);

  void forward(ConstMatrix input, int n, const StepContext& ctx) override;
  void backward(ConstMatrix output_grad, int n) override;
  std::int64_t flops_per_sample() const override;  // 6 * d * V/tp per row

  std::size_t weight_index() const { return weight_; }
  bool split() const { return tp_.active(); }

  void set_input_observer(ActivationObserver* observer) { observer_ = observer; }
  void set_int8(std::unique_ptr<kernels::Int8Linear> kernel);
  const kernels::Int8Linear* int8() const { return int8_.get(); }
  kernels::ByteView quantized_input() const { return xq_; }
  void forward_quantized_input(int n);

 private:
  ParameterStore* store_;
  std::size_t weight_;
  TensorParallel tp_;
  AutocastOperand x16_;   // [cap * d] x rounded, autocast only
  AutocastOperand dl16_;  // [cap * V/tp] dl rounded, autocast only
  ActivationObserver* observer_ = nullptr;
  std::unique_ptr<kernels::Int8Linear> int8_;
  kernels::ByteView xq_;  // [cap * d] the quantized input, int8 only
};

}  // namespace trellis::nn
