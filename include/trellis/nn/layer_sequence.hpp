// LayerSequence: layers applied one after another (an MLP, a CNN, a pipeline stage's share),
// which also tells the ParameterStore how far backward has got.
//
// Layers register their parameters while they are built, in forward order, so layer i's
// parameters occupy [param_begin(i), param_begin(i + 1)) of the flat buffers. Backward runs
// the layers in reverse; once layer i is done, every gradient at offsets >= param_begin(i)
// is final for this call, and backward() says so through store.grads_final_from(), which lets
// the data-parallel reducer start those buckets while earlier layers still compute.
#pragma once

#include "trellis/nn/layer.hpp"
#include "trellis/nn/parameter_store.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace trellis::nn {

class LayerSequence {
 public:
  // Layers added later must register their parameters in `store` only while being built.
  explicit LayerSequence(const ParameterStore& store)
      : store_(&store), first_offset_(store.registration_cursor()) {}

  // Call right after building `layer` (its parameters registered): records where they end.
  Layer& add(std::unique_ptr<Layer> layer);

  // input [>= n, in_features of layer begin]; runs layers [begin, end). Returns the last
  // one's output [capacity, out_features] (rows [0, n) valid).
  ConstMatrix forward(ConstMatrix input, int n, const StepContext& ctx, std::size_t begin,
                      std::size_t end);
  ConstMatrix forward(ConstMatrix input, int n, const StepContext& ctx) {
    return forward(input, n, ctx, 0, size());
  }
  // output_grad [>= n, out_features of layer end - 1]; runs layers [begin, end) in reverse.
  // Returns layer begin's input gradient [capacity, in_features].
  ConstMatrix backward(ConstMatrix output_grad, int n, std::size_t begin, std::size_t end);
  ConstMatrix backward(ConstMatrix output_grad, int n) {
    return backward(output_grad, n, 0, size());
  }

  std::size_t size() const { return layers_.size(); }
  Layer& operator[](std::size_t i) { return *layers_.at(i); }
  const Layer& operator[](std::size_t i) const { return *layers_.at(i); }
  // First flat-buffer offset of layer i's parameters (== param_begin(i + 1) when it has none).
  std::size_t param_begin(std::size_t i) const;
  // Tells the store that layer i's gradients are final (for a caller that ran its backward).
  void grads_final(std::size_t i) const { store_->grads_final_from(param_begin(i)); }
  std::int64_t flops_per_sample(std::size_t begin, std::size_t end) const;
  std::int64_t flops_per_sample() const { return flops_per_sample(0, size()); }

 private:
  const ParameterStore* store_;
  std::size_t first_offset_;
  std::vector<std::unique_ptr<Layer>> layers_;  // in forward order
  std::vector<std::size_t> param_end_;          // [size()]: registration cursor after layer i
};

}  // namespace trellis::nn
