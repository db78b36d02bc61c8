// An int8 GPT's fused path (Block::fuse_int8: LayerNorms writing quantized bytes, residual
// adds in the projections' epilogues, GELU and quantization of the MLP's hidden layer in one
// pass; ln_f quantizing its output for the int8 head) against the same int8 layers run one by
// one, each quantizing its fp32 input: the logits agree to within what a rare one-level
// difference at a rounding tie can move them.
#include "catch.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/kernels/random_fill.hpp"
#include "trellis/nn/gpt.hpp"
#include "trellis/nn/quantization.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

using namespace trellis;

namespace {

nn::GptSpec small_spec() {
  nn::GptSpec spec;
  spec.n_layer = 2;
  spec.n_head = 2;
  spec.d_model = 32;  // head dimension 16: the vector attention tiles
  spec.seq_len = 9;
  spec.vocab = 19;
  spec.dropout = 0.0f;
  spec.capacity = 3;
  return spec;
}

// The same parameters in every store: U(-0.3, 0.3), LayerNorm gains in (0.7, 1.3).
void fill_parameters(nn::ParameterStore& store) {
  for (std::size_t i = 0; i < store.size(); ++i) {
    const std::string& name = store.info(i).name;
    const bool gain =
        name.find("ln_") != std::string::npos && name.substr(name.size() - 7) == ".weight";
    kernels::fill_uniform(store.param_vector(i), gain ? 0.7f : -0.3f, gain ? 1.3f : 0.3f, 91, i);
  }
}

}  // namespace

TEST_CASE("an int8 GPT's fused blocks compute what its int8 layers compute one by one",
          "[int8][gpt]") {
  const nn::GptSpec spec = small_spec();
  nn::ParameterStore fused_store, plain_store;
  nn::Gpt fused(spec, fused_store), plain(spec, plain_store);
  fused_store.finalize(1);
  plain_store.finalize(1);
  fill_parameters(fused_store);
  fill_parameters(plain_store);
  const int n = 3, rows = n * spec.seq_len;
  std::vector<std::int32_t> ids(static_cast<std::size_t>(rows));
  for (int i = 0; i < rows; ++i) ids[static_cast<std::size_t>(i)] = (7 * i + 3) % spec.vocab;
  const IntView tokens = test::labels_to_device(ids);
  nn::StepContext eval;
  eval.training = false;

  // Calibrate every Linear's input (min-max) on the batch itself, then quantize.
  const std::vector<nn::Layer*> layers = nn::quantizable_layers(fused);
  std::vector<nn::ActivationObserver> observers(layers.size());
  for (std::size_t i = 0; i < layers.size(); ++i) nn::set_input_observer(*layers[i], &observers[i]);
  fused.forward(tokens, n, eval);
  std::vector<nn::Int8Layer> int8;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    nn::set_input_observer(*layers[i], nullptr);
    int8.push_back(nn::quantize_layer(*layers[i], fused_store,
                                      observers[i].choose(nn::CalibrationMethod::minmax)));
  }
  REQUIRE(int8.size() == 9);  // 4 Linears per block, the head
  nn::attach_int8(fused, fused_store, int8);
  nn::attach_int8(plain, plain_store, int8, kernels::Int8Backend::automatic, false);
  CHECK(fused.block(0).int8_fused());
  CHECK(fused.block(1).int8_fused());
  CHECK_FALSE(plain.block(0).int8_fused());

  const std::vector<float> a = test::to_host(fused.forward(tokens, n, eval));
  const std::vector<float> b = test::to_host(plain.forward(tokens, n, eval));
  REQUIRE(a.size() == b.size());
  double worst = 0.0, total = 0.0, scale = 0.0;
  for (std::size_t e = 0; e < a.size(); ++e) {
    const double diff = std::abs(static_cast<double>(a[e]) - b[e]);
    worst = std::max(worst, diff);
    total += diff;
    scale = std::max(scale, std::abs(static_cast<double>(b[e])));
  }
  INFO("worst " << worst << ", mean " << total / a.size() << ", largest logit " << scale);
  CHECK(scale > 0.1);
  CHECK(worst < 2e-2 * scale);
  CHECK(total / static_cast<double>(a.size()) < 1e-3 * scale);
  // A second forward of the fused model gives the same logits (no state carried over).
  CHECK(test::to_host(fused.forward(tokens, n, eval)) == a);
}
