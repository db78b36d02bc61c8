#include "trellis/nn/cnn.hpp"

#include "trellis/core/error.hpp"
#include "trellis/nn/conv2d.hpp"
#include "trellis/nn/linear.hpp"
#include "trellis/nn/pool.hpp"
#include "trellis/nn/residual.hpp"

#include <algorithm>

namespace trellis::nn {

void validate(const CnnSpec& spec) {
  if (spec.channels <= 0 || spec.height <= 0 || spec.width <= 0) {
    throw ConfigError("cnn: input image [C, H, W] = [" + std::to_string(spec.channels) + ", " +
                      std::to_string(spec.height) + ", " + std::to_string(spec.width) +
                      "] must be positive");
  }
  if (spec.classes <= 0) throw ConfigError("cnn: classes must be positive");
  if (spec.capacity <= 0) {
    throw ConfigError("cnn: capacity (max images per call) must be positive");
  }
  if (spec.widths.empty()) {
    throw ConfigError("model.widths: the cnn needs at least one stage width (e.g. 32,64,128)");
  }
  for (std::size_t i = 0; i < spec.widths.size(); ++i) {
    if (spec.widths[i] <= 0) {
      throw ConfigError("model.widths: stage " + std::to_string(i + 1) + " width is " +
                        std::to_string(spec.widths[i]) + ", must be positive");
    }
  }
  if (spec.blocks_per_stage <= 0) {
    throw ConfigError("model.blocks: blocks per stage is " + std::to_string(spec.blocks_per_stage) +
                      ", must be at least 1");
  }
  const std::size_t blocks = spec.widths.size() * static_cast<std::size_t>(spec.blocks_per_stage);
  if (!spec.block_widths.empty() && spec.block_widths.size() != blocks)
    throw ConfigError("model.block_widths: " + std::to_string(spec.block_widths.size()) +
                      " inner widths given, the cnn has " + std::to_string(blocks) +
                      " blocks (model.widths x model.blocks); leave it empty for full widths");
  for (std::size_t i = 0; i < spec.block_widths.size(); ++i)
    if (spec.block_widths[i] <= 0)
      throw ConfigError("model.block_widths: block " + std::to_string(i + 1) + " inner width is " +
                        std::to_string(spec.block_widths[i]) + ", must be positive");
}

Cnn::Cnn(const CnnSpec& spec, ParameterStore& store, const std::string& prefix)
    : spec_(spec), prefix_(prefix), layers_(store) {
  validate(spec);
  RecomputeSpec recompute = spec.recompute;
  if (recompute.mode == Recompute::selective) recompute.mode = Recompute::none;
  blocks_ = std::make_unique<BlockStack>(prefix + "blocks", recompute, spec.capacity, &store);
  const int cap = spec.capacity;
  const MpiComm* sync = spec.sync_bn ? spec.dp : nullptr;
  int channels = spec.widths.front(), height = spec.height, width = spec.width;
  channel_block_ = conv_channel_block(spec.conv_layout, spec.conv_impl, store);
  const int stem_block = kernels::channel_block_for(channels, channel_block_);

  Conv2dSpec stem;
  stem.in_channels = spec.channels;
  stem.out_channels = channels;
  stem.kernel = 3;
  stem.stride = 1;
  stem.padding = 1;
  stem.height = height;
  stem.width = width;
  stem.bias = false;
  stem.impl = spec.conv_impl;
  stem.out_block = stem_block;  // the images stay NCHW rows
  auto stem_conv = std::make_unique<Conv2d>(store, prefix + "stem.conv", stem, cap);
  stem_conv->set_input_grad_needed(spec.input_grad);
  layers_.add(std::move(stem_conv));
  auto bn = std::make_unique<BatchNorm2d>(store, prefix + "stem.bn", channels, height, width, cap,
                                          0.1f, 1e-5f, sync, stem_block, /*relu_after=*/true);
  batchnorms_.push_back(bn.get());
  layers_.add(std::move(bn));
  first_block_ = layers_.size();
  for (std::size_t s = 0; s < spec.widths.size(); ++s) {
    for (int b = 0; b < spec.blocks_per_stage; ++b) {
      const int stride = (s > 0 && b == 0) ? 2 : 1;
      const std::string name =
          prefix + "stage" + std::to_string(s + 1) + ".block" + std::to_string(b + 1);
      const std::size_t index = block_names_.size();
      const int mid = spec.block_widths.empty() ? spec.widths[s] : spec.block_widths[index];
      std::unique_ptr<BasicBlock> block;
      {
        const SharedBufferScope shared = blocks_->building(index);
        block = std::make_unique<BasicBlock>(store, name, channels, spec.widths[s], stride, height,
                                             width, cap, sync, spec.conv_impl, mid, channel_block_);
      }
      blocks_->add(*block);
      block_names_.push_back(name);
      for (const BatchNorm2d* norm : block->batchnorms()) batchnorms_.push_back(norm);
      channels = block->out_channels();
      height = block->out_height();
      width = block->out_width();
      layers_.add(std::move(block));
    }
  }
  blocks_->finish();
  end_block_ = layers_.size();
  layers_.add(
      std::make_unique<GlobalAvgPool>(prefix + "pool", channels, height, width, cap,
                                      kernels::channel_block_for(channels, channel_block_)));
  layers_.add(std::make_unique<Linear>(store, prefix + "head", channels, spec.classes, cap));
}

ConstMatrix Cnn::forward(ConstMatrix input, int n, const StepContext& ctx) {
  ConstMatrix x = layers_.forward(input, n, ctx, 0, first_block_);
  x = blocks_->forward(x, n, ctx);
  return kernels::first_rows(layers_.forward(x, n, ctx, end_block_, layers_.size()), n);
}

void Cnn::backward(ConstMatrix dlogits, int n) {
  ConstMatrix dy = layers_.backward(dlogits, n, end_block_, layers_.size());
  dy = blocks_->backward(dy, n, [&](std::size_t i) { layers_.grads_final(first_block_ + i); });
  layers_.backward(dy, n, 0, first_block_);
}

ConstMatrix Cnn::input_grad() const {
  if (!spec_.input_grad)
    throw Error("cnn: input_grad() of a model built without CnnSpec::input_grad");
  return layers_[0].input_grad();
}

std::int64_t Cnn::flops_per_sample() const { return layers_.flops_per_sample(); }

std::string Cnn::describe() const {
  std::string text = "cnn ";
  for (std::size_t i = 0; i < spec_.widths.size(); ++i) {
    text += (i ? "-" : "") + std::to_string(spec_.widths[i]);
  }
  text += " x" + std::to_string(spec_.blocks_per_stage) + " (" + std::to_string(spec_.height) +
          "x" + std::to_string(spec_.width) + "x" + std::to_string(spec_.channels) + ")";
  if (!spec_.block_widths.empty()) {
    text += " inner";
    for (std::size_t i = 0; i < spec_.block_widths.size(); ++i)
      text += (i ? "-" : " ") + std::to_string(spec_.block_widths[i]);
  }
  if (spec_.sync_bn && spec_.dp != nullptr) text += " sync-bn";
  return text;
}

std::vector<std::pair<std::string, std::string>> Cnn::conv_batchnorm_pairs() const {
  std::vector<std::pair<std::string, std::string>> pairs{
      {prefix_ + "stem.conv", prefix_ + "stem.bn"}};
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const auto* block = dynamic_cast<const BasicBlock*>(&layers_[i]);
    if (block == nullptr) continue;
    const std::string& b = block->name();
    pairs.push_back({b + ".conv1", b + ".bn1"});
    pairs.push_back({b + ".conv2", b + ".bn2"});
    if (block->has_projection()) pairs.push_back({b + ".shortcut.conv", b + ".shortcut.bn"});
  }
  return pairs;
}

std::vector<PrunableUnits> Cnn::prunable_units() const {
  std::vector<PrunableUnits> units;
  for (const std::string& block : block_names_) {
    PrunableUnits u;
    u.weight = block + ".conv1.weight";
    u.followers = {block + ".bn1.weight", block + ".bn1.bias"};
    u.follower_buffers = {block + ".bn1.running_mean", block + ".bn1.running_var"};
    u.consumer = block + ".conv2.weight";
    units.push_back(std::move(u));
  }
  return units;
}

std::vector<NamedBuffer> Cnn::buffers() const {
  std::vector<NamedBuffer> all;
  for (const BatchNorm2d* bn : batchnorms_) {
    all.push_back({bn->name() + ".running_mean", bn->running_mean()});
    all.push_back({bn->name() + ".running_var", bn->running_var()});
  }
  return all;
}

}  // namespace trellis::nn
