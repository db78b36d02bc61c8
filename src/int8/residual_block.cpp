#include "trellis/int8/residual_block.hpp"

#include "trellis/core/error.hpp"

namespace trellis::int8 {

namespace {

// The int8 kernel of `conv`, channels-last in and out, its BatchNorm folded in.
std::unique_ptr<kernels::Int8Conv2d> channels_last_conv(const nn::Conv2d& conv,
                                                        Int8LayerTable& layers,
                                                        kernels::Activation activation,
                                                        kernels::Int8Backend backend) {
  const Int8Layer& q = layers.take(conv.name());
  if (q.folded_norm.empty())
    throw Error("int8 layer '" + q.name +
                "': the int8 residual block needs the BatchNorm after it folded in");
  auto kernel =
      make_int8_conv(q, conv.geometry(), conv.out_channels(), conv.capacity(), activation, backend);
  kernel->set_channels_last(true, true);
  return kernel;
}

}  // namespace

Int8BasicBlock::Int8BasicBlock(const nn::BasicBlock& block, Int8LayerTable& layers,
                               kernels::Int8Backend backend)
    : Layer(block.name(), block.in_features(), block.out_features(), block.capacity(),
            InferenceOnly{}) {
  const auto relu = kernels::Activation::relu;
  conv1_ = channels_last_conv(block.conv1(), layers, relu, backend);
  conv2_ = channels_last_conv(block.conv2(), layers, relu, backend);
  conv2_->set_accumulate(true);
  if (block.shortcut_conv() != nullptr)
    shortcut_ =
        channels_last_conv(*block.shortcut_conv(), layers, kernels::Activation::none, backend);
  inner_ = FloatView("trellis::int8::" + name() + ".inner",
                     static_cast<std::size_t>(capacity()) *
                         static_cast<std::size_t>(block.conv1().out_features()));
}

void Int8BasicBlock::forward(ConstMatrix input, int n, const nn::StepContext&) {
  const ConstMatrix x = begin_forward(input, n);
  const Matrix y = output_rows(n);
  if (shortcut_)
    shortcut_->forward(x, n, y);
  else
    Kokkos::deep_copy(y, x);
  const Matrix a = as_matrix(inner_, n, static_cast<int>(inner_.size() / capacity()));
  conv1_->forward(x, n, a);
  conv2_->forward(a, n, y);
}

void Int8BasicBlock::backward(ConstMatrix, int) {
  throw Error("layer \"" + name() + "\": an int8 layer is for inference only");
}

}  // namespace trellis::int8
