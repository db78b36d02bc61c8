// model.type = cnn: a ResNet-style convolutional network on image samples [C, H, W]
// (nn/cnn.hpp).
#include "registration_util.hpp"
#include "trellis/int8/classifiers.hpp"
#include "trellis/nn/cnn.hpp"
#include "trellis/train/model/model_registry.hpp"

#include <algorithm>

namespace trellis {

namespace {

std::unique_ptr<nn::Model> build_cnn(const ModelBuildArgs& a) {
  if (a.data.sample_shape.size() != 3)
    throw ConfigError(
        "config key model.type = cnn needs image samples [C, H, W], but the training set has " +
        shape_string(a.data.sample_shape));
  nn::CnnSpec spec;
  spec.channels = spec_int(a.data.sample_shape[0], "image channels");
  spec.height = spec_int(a.data.sample_shape[1], "image height");
  spec.width = spec_int(a.data.sample_shape[2], "image width");
  spec.classes = a.data.classes;
  spec.widths = a.model.widths;
  spec.blocks_per_stage = a.model.blocks;
  spec.block_widths = a.model.block_widths;
  spec.sync_bn = a.model.sync_bn && a.dp != nullptr;
  spec.conv_impl = nn::parse_conv_impl(a.kernels.conv);
  spec.conv_layout = nn::parse_conv_layout(a.kernels.conv_layout);
  spec.dp = a.dp;
  spec.capacity = spec_int(a.capacity, "batch");
  spec.recompute = a.recompute;
  return std::make_unique<nn::Cnn>(spec, a.store);
}

ModelSizes cnn_sizes(const ModelConfig& model, const DataShape& data, int) {
  using Bytes = long double;
  ModelSizes s;
  const Bytes channels = data.sample_shape.size() == 3 ? data.sample_shape[0] : 1;
  Bytes pixels = data.sample_shape.size() == 3
                     ? static_cast<Bytes>(data.sample_shape[1]) * data.sample_shape[2]
                     : static_cast<Bytes>(data.feature_numel);
  Bytes in = channels;
  for (std::size_t stage = 0; stage < model.widths.size(); ++stage) {
    const Bytes w = model.widths[stage];
    if (stage > 0) pixels = std::max<Bytes>(1, pixels / 4);
    const Bytes convs = 1 + 2 * static_cast<Bytes>(model.blocks);
    s.params += 9 * in * w + (convs - 1) * 9 * w * w + convs * 4 * w;
    s.per_sample += convs * 6 * w * pixels;  // conv out, BN out, activation, and gradients
    in = w;
  }
  s.params += in * data.classes + data.classes;
  s.params_key = "model.widths";
  s.sample_key = "model.widths";
  return s;
}

// One unit (the CNN is not split): 3 x 3 convolutions as cnn_sizes counts them (stage widths;
// the blocks' inner widths are not told apart), 6 FLOPs per multiply-add forward + backward,
// and per convolution output element about 12 floats of BatchNorm (statistics, normalise,
// backward) and ReLU passes.
ModelWork cnn_work(const ModelConfig& model, const DataShape& data, int, int, bool) {
  const ModelSizes sizes = cnn_sizes(model, data, 0);
  ModelWork work;
  work.params = static_cast<double>(sizes.params);
  UnitWork u;
  double channels = data.sample_shape.size() == 3 ? static_cast<double>(data.sample_shape[0]) : 1;
  double pixels = data.sample_shape.size() == 3
                      ? static_cast<double>(data.sample_shape[1]) * data.sample_shape[2]
                      : static_cast<double>(data.feature_numel);
  for (std::size_t stage = 0; stage < model.widths.size(); ++stage) {
    const double w = model.widths[stage];
    if (stage > 0) pixels = std::max(1.0, pixels / 4);
    const double convs = 1 + 2.0 * model.blocks;
    u.convs.push_back({6 * 9 * pixels * w * (channels + (convs - 1) * w), w});
    u.elementwise_floats += 12 * convs * w * pixels;
    u.kernels += 8 * convs;  // convolution, BatchNorm, ReLU, forward and backward
    channels = w;
  }
  u.gemms.push_back({1, static_cast<double>(data.classes), channels});
  u.elementwise_floats += 4.0 * data.classes;
  u.params = work.params;
  work.units.push_back(u);
  return work;
}

}  // namespace

ModelRegistration cnn_registration() {
  ModelRegistration r;
  r.type = ModelType::cnn;
  r.name = "cnn";
  r.config_keys = {"model.widths",  "model.blocks", "model.block_widths",
                   "model.sync_bn", "kernels.conv", "kernels.conv_layout"};
  r.data = DataKind::samples;
  r.tensor_parallel = false;
  r.pipeline_parallel = false;
  r.recompute_blocks = true;  // full, per residual block or group of blocks
  r.build = build_cnn;
  r.validate = [](const ModelConfig&) {};
  r.flops_per_sample = flops_of_built;
  r.sizes = cnn_sizes;
  r.work = cnn_work;
  r.set_pruned_widths = [](ModelConfig& model, const std::vector<int>& widths) {
    model.block_widths = widths;
  };
  // Parameter shapes depend only on the image channels and the classes (the CNN pools
  // globally, so any image size gives the same parameters; the configured one is not stored).
  r.data_shape_from_weights = [](const ModelConfig&,
                                 const std::function<Shape(const std::string&)>& shape_of) {
    DataShape shape;
    shape.classes = static_cast<int>(shape_of("head.weight").at(0));
    shape.sample_shape = {shape_of("stem.conv.weight").at(1), 8, 8};
    shape.feature_numel = shape_numel(shape.sample_shape);
    return shape;
  };
  r.to_int8 = int8_converter<nn::Cnn, int8::Int8Cnn>();
  return r;
}

}  // namespace trellis
