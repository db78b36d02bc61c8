// Cnn: a ResNet-style image classifier (ResNet-18's CIFAR variant, scaled by the spec).
//
//   input [n, C*H*W] (NCHW images flattened into rows)
//   stem:     stem.conv (3x3, stride 1, pad 1, C -> widths[0], no bias) -> stem.bn (its ReLU fused)
//   stage s:  blocks_per_stage BasicBlocks "stage<s+1>.block<b+1>" of width widths[s]; the first
//             block of every stage after the first has stride 2 (and a 1x1 projection shortcut)
//   pool:     global average pool -> [n, widths.back()]
//   head:     Linear "head.weight" [classes, widths.back()], "head.bias" [classes]
//   -> logits [n, classes]
// Spatial size through a stride-2 stage: H -> (H - 1) / 2 + 1 (28 -> 14 -> 7, 32 -> 16 -> 8).
// From the stem's output to the pool, activations are in oneDNN's channel-blocked layout where
// the convolutions run on oneDNN (CnnSpec::conv_layout): the layers between the convolutions
// index channels in it, and no reorder sits around a convolution.
// BatchNorms use batch statistics when ctx.training and running statistics otherwise; with
// sync_bn and a dp communicator they synchronise their statistics over it (SyncBatchNorm), so
// data-parallel ranks compute what one rank computes on the global batch.
// Gradient rule as for every layer: parameter grads +=, input grad =.
#pragma once

#include "trellis/comm/mpi_comm.hpp"
#include "trellis/kernels/views.hpp"
#include "trellis/nn/batchnorm.hpp"
#include "trellis/nn/block_stack.hpp"
#include "trellis/nn/conv2d.hpp"
#include "trellis/nn/layer.hpp"
#include "trellis/nn/layer_sequence.hpp"
#include "trellis/nn/model.hpp"
#include "trellis/nn/parameter_store.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace trellis::nn {

struct CnnSpec {
  int channels = 0, height = 0, width = 0;  // input image [C, H, W]
  int classes = 0;
  std::vector<int> widths;   // channels per stage, e.g. {32, 64, 128}  (config: model.widths)
  int blocks_per_stage = 1;  // BasicBlocks per stage                    (config: model.blocks)
  // Inner width (conv1's output channels) of every block, stage by stage; empty: each
  // block's stage width. A channel-pruned model's (config: model.block_widths).
  std::vector<int> block_widths;
  bool sync_bn = false;                      // synchronise BatchNorm statistics over dp
  ConvImpl conv_impl = ConvImpl::automatic;  // config: kernels.conv
  // Activations between the convolutions in oneDNN's channel-blocked layout, so no reorder sits
  // around a convolution (config: kernels.conv_layout; nn/conv2d.hpp ConvLayout).
  ConvLayout conv_layout = ConvLayout::automatic;
  // Compute the gradient w.r.t. the input images (gradient checks): training does not need
  // it, so by default the stem convolution skips its backward-data pass.
  bool input_grad = false;
  const MpiComm* dp = nullptr;  // data-parallel communicator (may be null: no synchronisation)
  int capacity = 0;             // max images per forward/backward call
  // The residual blocks run as a BlockStack (shared backward scratch; full recomputation per
  // block or group of blocks; selective is the transformers' and counts as none here).
  RecomputeSpec recompute;
};

class Cnn : public Model {
 public:
  // Validates the spec (ConfigError naming model.widths / model.blocks / ...) and registers all
  // parameters in `store`, which must be finalized before the first forward and outlive the Cnn
  // (as must spec.dp).
  Cnn(const CnnSpec& spec, ParameterStore& store, const std::string& prefix = "");

  // input: [>= n, C*H*W]; must stay unchanged until backward. Returns logits [n, classes], a
  // window onto the head's output (valid until the next forward).
  ConstMatrix forward(ConstMatrix input, int n, const StepContext& ctx);
  ConstMatrix forward(const ModelInput& input, int n, const StepContext& ctx) override {
    return forward(input.features, n, ctx);
  }
  void backward(ConstMatrix dlogits, int n) override;
  int classes() const override { return spec_.classes; }
  int capacity() const override { return spec_.capacity; }
  // "cnn 32-64-128 x1 (28x28x1)": stage widths, blocks per stage, (H x W x C).
  std::string describe() const override;
  // Forward + backward FLOPs per sample: 6 * MACs of every convolution and of the head
  // (2 per multiply-add forward, twice that backward for the weight and input gradients);
  // BatchNorm, ReLU, pooling and the residual adds are not counted.
  std::int64_t flops_per_sample() const override;

  ConstMatrix input_grad() const;  // [capacity, C*H*W]
  const CnnSpec& spec() const { return spec_; }
  // The channel block the activations after the stem are held in where it divides their
  // channels (kernels/channel_layout.hpp): 1 = NCHW throughout. The input and the logits are
  // plain rows whatever it is.
  int channel_block() const { return channel_block_; }
  std::size_t num_layers() const { return layers_.size(); }
  const Layer& layer(std::size_t i) const { return layers_[i]; }
  Layer& layer(std::size_t i) { return layers_[i]; }
  // Every BatchNorm's running mean and variance, in forward order.
  std::vector<NamedBuffer> buffers() const override;
  // Every block's conv1 output channels, with bn1 (gamma, beta, running statistics), read by
  // the block's conv2. The stem and the residual stream keep their width: a channel removed
  // there would have to go from every block of the stage and the shortcuts at once.
  std::vector<PrunableUnits> prunable_units() const override;
  // stem.conv / stem.bn and every block's conv1 / bn1, conv2 / bn2, shortcut.conv / .bn.
  std::vector<std::pair<std::string, std::string>> conv_batchnorm_pairs() const override;
  void for_each_layer(const std::function<void(Layer&)>& f) override {
    for (std::size_t i = 0; i < layers_.size(); ++i) visit_layers(layers_[i], f);
  }

 private:
  CnnSpec spec_;
  std::string prefix_;
  std::unique_ptr<BlockStack> blocks_;  // runs layers_ [first_block_, end_block_); outlives them
  LayerSequence layers_;
  std::size_t first_block_ = 0, end_block_ = 0;
  int channel_block_ = 1;
  std::vector<const BatchNorm2d*> batchnorms_;  // all BatchNorms, in forward order
  std::vector<std::string> block_names_;        // "stage1.block1", ... in forward order
};

// Throws ConfigError naming the first bad field (model.widths, model.blocks, ...).
void validate(const CnnSpec& spec);

}  // namespace trellis::nn
