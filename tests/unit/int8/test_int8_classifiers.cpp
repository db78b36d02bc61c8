// The int8 forms of the MLP and the CNN against their fp32 models: calibrated (min-max) on the
// batch they then run, their logits stay within a few percent of the fp32 logits, which a wrong
// layout (the CNN's channels-last chain), a BatchNorm folded wrongly or a lost activation would
// not. And the conversion refuses what does not fit: a layer missing from the int8 weights, one
// the model does not have, a CNN convolution without its BatchNorm folded in.
#include "catch.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/core/error.hpp"
#include "trellis/int8/calibration.hpp"
#include "trellis/int8/classifiers.hpp"
#include "trellis/int8/quantize_layer.hpp"
#include "trellis/kernels/random_fill.hpp"
#include "trellis/nn/batchnorm.hpp"
#include "trellis/nn/cnn.hpp"
#include "trellis/nn/mlp.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

using namespace trellis;

namespace {

// Every quantizable layer of `model` calibrated (min-max) on one eval forward of `x`, each
// convolution with its BatchNorm folded in, as trellis quantize does.
std::vector<int8::Int8Layer> quantize_model(nn::Model& model, nn::ParameterStore& store,
                                            const FloatView& x, int n) {
  const std::vector<nn::Layer*> layers = int8::quantizable_layers(model);
  std::vector<int8::ActivationObserver> observers(layers.size());
  for (std::size_t i = 0; i < layers.size(); ++i) layers[i]->set_input_observer(&observers[i]);
  nn::ModelInput input;
  input.features = as_matrix(x, n, static_cast<int>(x.size()) / n);
  nn::StepContext eval;
  eval.training = false;
  model.forward(input, n, eval);
  std::map<std::string, const nn::BatchNorm2d*> norms, folds;
  model.for_each_layer([&](nn::Layer& layer) {
    if (const auto* norm = dynamic_cast<const nn::BatchNorm2d*>(&layer)) norms[norm->name()] = norm;
  });
  for (const auto& [conv, norm] : model.conv_batchnorm_pairs()) folds[conv] = norms.at(norm);
  std::vector<int8::Int8Layer> quantized;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    layers[i]->set_input_observer(nullptr);
    const auto fold = folds.find(layers[i]->name());
    quantized.push_back(int8::quantize_layer(*layers[i], store,
                                             observers[i].choose(int8::CalibrationMethod::minmax),
                                             fold == folds.end() ? nullptr : fold->second));
  }
  return quantized;
}

std::vector<float> logits_of(nn::Model& model, const FloatView& x, int n) {
  nn::ModelInput input;
  input.features = as_matrix(x, n, static_cast<int>(x.size()) / n);
  nn::StepContext eval;
  eval.training = false;
  return test::to_host(model.forward(input, n, eval));
}

// max |a - b| over max |b|.
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0.0, scale = 0.0;
  for (std::size_t e = 0; e < a.size(); ++e) {
    worst = std::max(worst, std::abs(static_cast<double>(a[e]) - b[e]));
    scale = std::max(scale, std::abs(static_cast<double>(b[e])));
  }
  REQUIRE(scale > 0.0);
  return worst / scale;
}

}  // namespace

TEST_CASE("an int8 MLP computes what its fp32 model computes, to int8 precision", "[int8]") {
  nn::MlpSpec spec;
  spec.input_dim = 24;
  spec.hidden = {32, 16};
  spec.classes = 5;
  spec.activation = GENERATE("relu", "gelu");
  spec.capacity = 6;
  nn::ParameterStore store;
  nn::Mlp fp32(spec, store);
  store.finalize(3);
  const int n = 6;
  const FloatView x = test::to_device("x", test::random_values(n * 24, 5));
  const std::vector<float> reference = logits_of(fp32, x, n);
  const std::vector<int8::Int8Layer> quantized = quantize_model(fp32, store, x, n);
  REQUIRE(quantized.size() == 3);
  int8::Int8Mlp mlp(fp32, store, quantized, {});
  const double error = relative_error(logits_of(mlp, x, n), reference);
  INFO(spec.activation << ": worst logit error " << error << " of the largest");
  CHECK(error < 0.05);
  CHECK(error > 0.0);  // int8 indeed

  SECTION("the conversion refuses int8 weights that do not fit the model") {
    std::vector<int8::Int8Layer> missing(quantized.begin(), quantized.end() - 1);
    CHECK_THROWS_WITH(int8::Int8Mlp(fp32, store, missing, {}),
                      Catch::Contains("no int8 layer 'head'"));
    std::vector<int8::Int8Layer> extra = quantized;
    extra.push_back(quantized.front());
    extra.back().name = "fc9";
    CHECK_THROWS_WITH(int8::Int8Mlp(fp32, store, extra, {}), Catch::Contains("'fc9'"));
    std::vector<int8::Int8Layer> wrong = quantized;
    wrong.front().weight_shape = {16, 24};
    CHECK_THROWS_WITH(int8::Int8Mlp(fp32, store, wrong, {}), Catch::Contains("'fc1'"));
  }
}

TEST_CASE("an int8 CNN computes what its fp32 model computes, channels-last, BatchNorms folded",
          "[int8][conv]") {
  nn::CnnSpec spec;
  spec.channels = 2;
  spec.height = spec.width = 8;
  spec.classes = 4;
  spec.widths = {4, 8};  // an identity block, then a strided block with a projection shortcut
  spec.capacity = 3;
  nn::ParameterStore store;
  nn::Cnn fp32(spec, store);
  store.finalize(7);
  // Running statistics away from (0, 1), so that folding them in matters.
  std::uint64_t stream = 0;
  for (const nn::NamedBuffer& buffer : fp32.buffers()) {
    const bool var = buffer.name.find("running_var") != std::string::npos;
    kernels::fill_uniform(buffer.data, var ? 0.5f : -0.2f, var ? 1.5f : 0.2f, 11, ++stream);
  }
  const int n = 3;
  const FloatView x = test::to_device("x", test::random_values(n * 2 * 64, 9, 0.0f, 1.0f));
  const std::vector<float> reference = logits_of(fp32, x, n);
  const std::vector<int8::Int8Layer> quantized = quantize_model(fp32, store, x, n);
  REQUIRE(quantized.size() == 7);  // stem, 2 + 3 block convolutions, head
  int8::Int8Cnn cnn(fp32, store, quantized, {});
  const double error = relative_error(logits_of(cnn, x, n), reference);
  INFO("worst logit error " << error << " of the largest");
  CHECK(error < 0.05);
  CHECK(error > 0.0);
  // The reference kernels give the same logits as the vendor path, to rounding.
  int8::Int8Options reference_kernels;
  reference_kernels.backend = kernels::Int8Backend::reference;
  int8::Int8Cnn portable(fp32, store, quantized, reference_kernels);
  CHECK(relative_error(logits_of(portable, x, n), logits_of(cnn, x, n)) < 1e-5);

  SECTION("a convolution without its BatchNorm folded in is refused") {
    std::vector<int8::Int8Layer> unfolded = quantized;
    for (int8::Int8Layer& q : unfolded)
      if (q.name == "stage2.block1.conv2") q.folded_norm.clear();
    CHECK_THROWS_WITH(int8::Int8Cnn(fp32, store, unfolded, {}),
                      Catch::Contains("stage2.block1.conv2"));
  }
}
