#include "trellis/int8/classifiers.hpp"

#include "trellis/nn/mlp_layer.hpp"

#include "trellis/core/error.hpp"
#include "trellis/int8/linear_layer.hpp"
#include "trellis/int8/residual_block.hpp"
#include "trellis/nn/activation.hpp"
#include "trellis/nn/batchnorm.hpp"
#include "trellis/nn/conv2d.hpp"
#include "trellis/nn/linear.hpp"
#include "trellis/nn/mlp_layer.hpp"
#include "trellis/nn/pool.hpp"
#include "trellis/nn/residual.hpp"

namespace trellis::int8 {

ConstMatrix Int8Chain::forward(const nn::ModelInput& input, int n, const nn::StepContext& ctx) {
  TRELLIS_REQUIRE(!ctx.training, "int8 model " + describe() + ": inference only");
  ConstMatrix x = input.features;
  for (nn::Layer* step : steps_) {
    step->forward(x, n, ctx);
    x = step->output();
  }
  return kernels::first_rows(x, n);
}

void Int8Chain::for_each_layer(const std::function<void(nn::Layer&)>& f) {
  for (nn::Layer* step : steps_) nn::visit_layers(*step, f);
}

void Int8Chain::add(std::unique_ptr<nn::Layer> int8_layer) {
  steps_.push_back(int8_layer.get());
  owned_.push_back(std::move(int8_layer));
}

// The store is in the converters' common signature (int8_converter); these layers read their
// parameters through the fp32 layers they replace.
Int8Mlp::Int8Mlp(nn::Mlp& mlp, const nn::ParameterStore& /*store*/,
                 const std::vector<Int8Layer>& layers, const Int8Options& options)
    : Int8Chain(mlp) {
  Int8LayerTable table(layers);
  const auto add_step = [&](nn::Layer& layer) {
    if (const auto* linear = dynamic_cast<const nn::Linear*>(&layer))
      add(std::make_unique<Int8LinearLayer>(table.take(linear->name()), *linear, options.backend));
    else
      add(layer);
  };
  for (std::size_t i = 0; i < mlp.num_layers(); ++i) {
    nn::Layer& layer = mlp.layer(i);
    if (dynamic_cast<nn::MlpLayer*>(&layer) != nullptr)  // a hidden layer: fc<i>, drop<i>
      layer.for_each_part(add_step);
    else
      add_step(layer);
  }
  table.require_all_taken();
}

namespace {

// The stem: its convolution with the BatchNorm after it folded in and the norm's ReLU in the
// epilogue; reads NCHW images, writes channels-last. Returns the layers it stands for.
std::size_t add_stem(const nn::Cnn& cnn, std::size_t i, Int8LayerTable& table,
                     const Int8Options& options, std::unique_ptr<Int8ConvLayer>& stem) {
  const auto& conv = dynamic_cast<const nn::Conv2d&>(cnn.layer(i));
  const Int8Layer& q = table.take(conv.name());
  const auto* norm =
      i + 1 < cnn.num_layers() ? dynamic_cast<const nn::BatchNorm2d*>(&cnn.layer(i + 1)) : nullptr;
  if (norm == nullptr || q.folded_norm != norm->name())
    throw Error("int8 layer '" + q.name + "': the int8 cnn needs the BatchNorm after it (" +
                (norm ? norm->name() : std::string("none")) + ") folded in, the file has '" +
                q.folded_norm + "'");
  stem = std::make_unique<Int8ConvLayer>(
      q, conv, norm->relu_after() ? kernels::Activation::relu : kernels::Activation::none,
      options.backend);
  stem->kernel().set_channels_last(false, true);
  return 2;
}

}  // namespace

Int8Cnn::Int8Cnn(nn::Cnn& cnn, const nn::ParameterStore& /*store*/,
                 const std::vector<Int8Layer>& layers, const Int8Options& options)
    : Int8Chain(cnn) {
  Int8LayerTable table(layers);
  bool stem_seen = false;
  for (std::size_t i = 0; i < cnn.num_layers();) {
    nn::Layer& layer = cnn.layer(i);
    if (!stem_seen && dynamic_cast<const nn::Conv2d*>(&layer) != nullptr) {
      std::unique_ptr<Int8ConvLayer> stem;
      i += add_stem(cnn, i, table, options, stem);
      add(std::move(stem));
      stem_seen = true;
      continue;
    }
    if (const auto* block = dynamic_cast<const nn::BasicBlock*>(&layer)) {
      add(std::make_unique<Int8BasicBlock>(*block, table, options.backend));
    } else if (const auto* pool = dynamic_cast<const nn::GlobalAvgPool*>(&layer)) {
      auto last = std::make_unique<nn::GlobalAvgPool>(pool->name(), pool->channels(), pool->plane(),
                                                      1, pool->capacity());
      last->set_channels_last(true);
      add(std::move(last));
    } else if (const auto* linear = dynamic_cast<const nn::Linear*>(&layer)) {
      // The classifier reads pooled features: no layout of its own.
      add(std::make_unique<Int8LinearLayer>(table.take(linear->name()), *linear, options.backend));
    } else {
      throw Error("int8 cnn: layer '" + layer.name() + "' has no int8 form");
    }
    ++i;
  }
  table.require_all_taken();
}

}  // namespace trellis::int8
