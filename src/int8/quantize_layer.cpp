#include "trellis/int8/quantize_layer.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/host_copy.hpp"
#include "trellis/nn/conv2d.hpp"
#include "trellis/nn/linear.hpp"
#include "trellis/nn/tied_head.hpp"

#include <cmath>

namespace trellis::int8 {

std::vector<nn::Layer*> quantizable_layers(nn::Model& model) {
  std::vector<nn::Layer*> layers;
  model.for_each_layer([&](nn::Layer& layer) {
    if (dynamic_cast<nn::Linear*>(&layer) != nullptr ||
        dynamic_cast<nn::Conv2d*>(&layer) != nullptr ||
        dynamic_cast<nn::TiedHead*>(&layer) != nullptr)
      layers.push_back(&layer);
  });
  return layers;
}

namespace {

// Symmetric per-row quantization of w [rows, numel / rows] into q.
void quantize_rows(const std::vector<float>& w, std::size_t rows, Int8Layer& q) {
  const std::size_t cols = w.size() / rows;
  const FloatView weights("trellis::quantize::w", w.size());
  copy_from_host(w, weights);
  kernels::Int8View bytes("trellis::quantize::weight", w.size());
  FloatView scales("trellis::quantize::scales", rows);
  kernels::quantize_weights(weights, rows, cols, bytes, scales);
  const auto b = Kokkos::create_mirror_view_and_copy(HostSpace(), bytes);
  q.weight.assign(b.data(), b.data() + b.extent(0));
  q.weight_scale = to_host_vector(scales);
}

}  // namespace

Int8Layer quantize_layer(const nn::Layer& layer, const nn::ParameterStore& store,
                         const kernels::ActivationQuant& input, const nn::BatchNorm2d* norm) {
  Int8Layer q;
  q.name = layer.name();
  q.input = input;
  if (const auto* linear = dynamic_cast<const nn::Linear*>(&layer)) {
    if (norm != nullptr) throw Error("quantize: a BatchNorm cannot fold into Linear " + q.name);
    q.weight_shape = {linear->out_features(), linear->in_features()};
    quantize_rows(to_host_vector(store.param_vector(linear->weight_index())),
                  static_cast<std::size_t>(linear->out_features()), q);
    return q;
  }
  if (const auto* head = dynamic_cast<const nn::TiedHead*>(&layer)) {
    if (norm != nullptr) throw Error("quantize: a BatchNorm cannot fold into head " + q.name);
    q.weight_shape = {head->out_features(), head->in_features()};
    quantize_rows(to_host_vector(store.param_vector(head->weight_index())),
                  static_cast<std::size_t>(head->out_features()), q);
    return q;
  }
  const auto* conv = dynamic_cast<const nn::Conv2d*>(&layer);
  if (conv == nullptr)
    throw Error("quantize: layer " + q.name + " is neither Linear, Conv2d nor a tied head");
  const kernels::ConvGeometry& g = conv->geometry();
  const auto out = static_cast<std::size_t>(conv->out_channels());
  q.weight_shape = {conv->out_channels(), g.channels, g.kernel, g.kernel};
  std::vector<float> w = to_host_vector(store.param_vector(conv->weight_index()));
  q.bias = conv->bias_index() ? to_host_vector(store.param_vector(*conv->bias_index()))
                              : std::vector<float>(out, 0.0f);
  if (norm != nullptr) {
    if (static_cast<std::size_t>(norm->channels()) != out)
      throw Error("quantize: BatchNorm " + norm->name() + " does not fit convolution " + q.name);
    const std::vector<float> gamma = to_host_vector(store.param_vector(norm->weight_index()));
    const std::vector<float> beta = to_host_vector(store.param_vector(norm->bias_index()));
    const std::vector<float> mean = to_host_vector(norm->running_mean());
    const std::vector<float> var = to_host_vector(norm->running_var());
    const std::size_t per_channel = w.size() / out;
    for (std::size_t o = 0; o < out; ++o) {
      const double factor =
          static_cast<double>(gamma[o]) /
          std::sqrt(static_cast<double>(var[o]) + static_cast<double>(norm->eps()));
      for (std::size_t e = 0; e < per_channel; ++e)
        w[o * per_channel + e] = static_cast<float>(w[o * per_channel + e] * factor);
      q.bias[o] = static_cast<float>(beta[o] + (q.bias[o] - static_cast<double>(mean[o])) * factor);
    }
    q.folded_norm = norm->name();
  }
  quantize_rows(w, out, q);
  return q;
}

}  // namespace trellis::int8
