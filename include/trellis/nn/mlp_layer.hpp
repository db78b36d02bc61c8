// MlpLayer: one hidden layer of the MLP as one layer, fc<i> (a Linear with its activation fused
// in the GEMM's epilogue) and, with dropout, drop<i> after it. It is the MLP's unit of memory
// management: a block of its BlockStack, so a unit of ZeRO-2/3 and of full recomputation.
// Allocates nothing itself: its output is the last part's, its input gradient fc's.
#pragma once

#include "trellis/nn/dropout.hpp"
#include "trellis/nn/layer.hpp"
#include "trellis/nn/linear.hpp"

#include <memory>

namespace trellis::nn {

class MlpLayer : public Layer {
 public:
  // drop: null without dropout. Build both inside the stack's building() scope.
  MlpLayer(std::unique_ptr<Linear> fc, std::unique_ptr<Dropout> drop);

  void forward(ConstMatrix input, int n, const StepContext& ctx) override;
  void backward(ConstMatrix output_grad, int n) override;
  std::int64_t flops_per_sample() const override { return fc_->flops_per_sample(); }
  void for_each_part(const std::function<void(Layer&)>& f) override;

  Linear& fc() { return *fc_; }
  const Linear& fc() const { return *fc_; }
  Dropout* dropout() { return drop_.get(); }

 private:
  std::unique_ptr<Linear> fc_;
  std::unique_ptr<Dropout> drop_;
};

}  // namespace trellis::nn
