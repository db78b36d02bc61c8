// The int8 forms of the classifiers (int8_model.hpp), each a chain of layers run in order:
//
//   MLP:  each Linear (fc<i> with its fused activation, the head) an Int8LinearLayer; the
//         dropout layers (the identity in inference) as they are.
//   CNN:  activations channels-last (NHWC) from the stem's output to the pool, the layout
//         oneDNN's int8 convolutions read and write; the stem reads the NCHW images.
//         stem.conv + stem.bn + stem.relu    one Int8ConvLayer (the BatchNorm folded into its
//                                            weights, the ReLU in its epilogue)
//         each BasicBlock                    an Int8BasicBlock (residual_block.hpp)
//         pool                               a channels-last GlobalAvgPool of its own
//         head                               an Int8LinearLayer
//       Every convolution needs its BatchNorm folded in (trellis quantize folds them all).
#pragma once

#include "trellis/int8/int8_model.hpp"
#include "trellis/nn/cnn.hpp"
#include "trellis/nn/layer.hpp"
#include "trellis/nn/mlp.hpp"
#include "trellis/nn/parameter_store.hpp"

#include <functional>
#include <memory>
#include <vector>

namespace trellis::int8 {

class Int8Chain : public Int8Model {
 public:
  // input.features [>= n, in] -> logits [n, classes], valid until the next forward.
  ConstMatrix forward(const nn::ModelInput& input, int n, const nn::StepContext& ctx) override;
  void for_each_layer(const std::function<void(nn::Layer&)>& f) override;

 protected:
  explicit Int8Chain(nn::Model& fp32) : Int8Model(fp32) {}
  void add(nn::Layer& fp32_layer) { steps_.push_back(&fp32_layer); }
  void add(std::unique_ptr<nn::Layer> int8_layer);

 private:
  std::vector<nn::Layer*> steps_;                  // in forward order
  std::vector<std::unique_ptr<nn::Layer>> owned_;  // the int8 layers among them
};

class Int8Mlp : public Int8Chain {
 public:
  // Every Linear of `mlp` from `layers` (all of which must be used); `mlp` and `store` must
  // outlive this model.
  Int8Mlp(nn::Mlp& mlp, const nn::ParameterStore& store, const std::vector<Int8Layer>& layers,
          const Int8Options& options);
};

class Int8Cnn : public Int8Chain {
 public:
  Int8Cnn(nn::Cnn& cnn, const nn::ParameterStore& store, const std::vector<Int8Layer>& layers,
          const Int8Options& options);
};

}  // namespace trellis::int8
