#include "trellis/nn/layer_sequence.hpp"

#include "trellis/core/error.hpp"
#include "trellis/kernels/views.hpp"

namespace trellis::nn {

Layer& LayerSequence::add(std::unique_ptr<Layer> layer) {
  TRELLIS_REQUIRE(layer != nullptr, "LayerSequence::add(nullptr)");
  layers_.push_back(std::move(layer));
  param_end_.push_back(store_->registration_cursor());
  return *layers_.back();
}

std::size_t LayerSequence::param_begin(std::size_t i) const {
  TRELLIS_REQUIRE(i <= layers_.size(), "LayerSequence: layer index out of range");
  return i == 0 ? first_offset_ : param_end_[i - 1];
}

ConstMatrix LayerSequence::forward(ConstMatrix input, int n, const StepContext& ctx,
                                   std::size_t begin, std::size_t end) {
  TRELLIS_REQUIRE(begin < end && end <= layers_.size(), "LayerSequence: bad layer range");
  ConstMatrix x = input;
  // [capacity, features] each; the next layer reads rows [0, n).
  for (std::size_t i = begin; i < end; ++i) {
    layers_[i]->forward(x, n, ctx);
    x = layers_[i]->output();
  }
  return x;
}

ConstMatrix LayerSequence::backward(ConstMatrix output_grad, int n, std::size_t begin,
                                    std::size_t end) {
  TRELLIS_REQUIRE(begin < end && end <= layers_.size(), "LayerSequence: bad layer range");
  ConstMatrix dy = output_grad;
  for (std::size_t i = end; i-- > begin;) {
    layers_[i]->backward(dy, n);
    dy = layers_[i]->input_grad();
    store_->grads_final_from(param_begin(i));
  }
  return dy;
}

std::int64_t LayerSequence::flops_per_sample(std::size_t begin, std::size_t end) const {
  std::int64_t total = 0;
  for (std::size_t i = begin; i < end && i < layers_.size(); ++i)
    total += layers_[i]->flops_per_sample();
  return total;
}

}  // namespace trellis::nn
