// An int8 GPT's chained blocks (LayerNorms writing quantized bytes, residual adds in the
// projections' epilogues, GELU and quantization of the MLP's hidden layer in one pass; ln_f
// quantizing its output for the int8 head) against the same int8 layers run one by one, each
// quantizing its fp32 input: the logits agree to within what a rare one-level difference at a
// rounding tie can move them. Both stay close to the fp32 model's logits.
#include "catch.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/core/error.hpp"
#include "trellis/int8/calibration.hpp"
#include "trellis/int8/gpt.hpp"
#include "trellis/int8/quantize_layer.hpp"
#include "trellis/kernels/random_fill.hpp"
#include "trellis/nn/gpt.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

using namespace trellis;

namespace {

// GPT-2's block (exact or tanh GELU), or Llama's (rotary positions, RMSNorm, SwiGLU,
// multi-query attention, no biases, untied head).
enum class Family { gpt2, gpt2_tanh, llama };
nn::GptSpec small_spec(Family family) {
  const bool llama = family == Family::llama;
  nn::GptSpec spec;
  spec.n_layer = 2;
  spec.n_head = 2;
  spec.d_model = 32;  // head dimension 16: the vector attention tiles
  spec.seq_len = 9;
  spec.vocab = 19;
  spec.dropout = 0.0f;
  spec.capacity = 3;
  if (llama) {
    spec.n_kv_head = 1, spec.d_ff = 48;
    spec.positions = nn::Positions::rope;
    spec.norm = nn::NormKind::rmsnorm;
    spec.mlp = nn::MlpKind::swiglu;
    spec.bias = false, spec.tied_head = false;
  }
  if (family == Family::gpt2_tanh) spec.mlp = nn::MlpKind::gelu_tanh;
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

TEST_CASE("an int8 GPT's chained blocks compute what its int8 layers compute one by one",
          "[int8][gpt]") {
  const Family family = GENERATE(Family::gpt2, Family::gpt2_tanh, Family::llama);
  INFO("family " << static_cast<int>(family) << " (gpt-2, gpt-2 tanh GELU, llama)");
  const nn::GptSpec spec = small_spec(family);
  nn::ParameterStore store;
  nn::Gpt fp32(spec, store);
  store.finalize(1);
  fill_parameters(store);
  const int n = 3, rows = n * spec.seq_len;
  std::vector<std::int32_t> ids(static_cast<std::size_t>(rows));
  for (int i = 0; i < rows; ++i) ids[static_cast<std::size_t>(i)] = (7 * i + 3) % spec.vocab;
  const IntView tokens = test::labels_to_device(ids);
  nn::StepContext eval;
  eval.training = false;

  // Calibrate every Linear's input (min-max) on the batch itself, then quantize.
  const std::vector<nn::Layer*> layers = int8::quantizable_layers(fp32);
  std::vector<int8::ActivationObserver> observers(layers.size());
  for (std::size_t i = 0; i < layers.size(); ++i) layers[i]->set_input_observer(&observers[i]);
  const std::vector<float> reference = test::to_host(fp32.forward(tokens, n, eval));
  std::vector<int8::Int8Layer> quantized;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    layers[i]->set_input_observer(nullptr);
    quantized.push_back(int8::quantize_layer(*layers[i], store,
                                             observers[i].choose(int8::CalibrationMethod::minmax)));
  }
  REQUIRE(quantized.size() == 9);  // 4 Linears per block, the head
  int8::Int8Options one_by_one;
  one_by_one.fuse = false;
  int8::Int8Gpt chained(fp32, store, quantized, {}), plain(fp32, store, quantized, one_by_one);
  CHECK(chained.block(0).chained());
  CHECK(chained.block(1).chained());
  CHECK_FALSE(plain.block(0).chained());

  nn::ModelInput input;
  input.tokens = tokens;
  const std::vector<float> a = test::to_host(chained.forward(input, n, eval));
  const std::vector<float> b = test::to_host(plain.forward(input, n, eval));
  REQUIRE(a.size() == b.size());
  REQUIRE(a.size() == reference.size());
  double worst = 0.0, total = 0.0, scale = 0.0, off_fp32 = 0.0;
  for (std::size_t e = 0; e < a.size(); ++e) {
    const double diff = std::abs(static_cast<double>(a[e]) - b[e]);
    worst = std::max(worst, diff);
    total += diff;
    scale = std::max(scale, std::abs(static_cast<double>(b[e])));
    off_fp32 = std::max(off_fp32, std::abs(static_cast<double>(a[e]) - reference[e]));
  }
  INFO("worst " << worst << ", mean " << total / a.size() << ", largest logit " << scale
                << ", worst against fp32 " << off_fp32);
  CHECK(scale > 0.1);
  CHECK(worst < 2e-2 * scale);
  CHECK(total / static_cast<double>(a.size()) < 1e-3 * scale);
  // Int8 with min-max scales on the calibration batch itself: a few percent of the largest
  // logit off the fp32 model at most.
  CHECK(off_fp32 < 0.1 * scale);
  // A second forward of the chained model gives the same logits (no state carried over).
  CHECK(test::to_host(chained.forward(input, n, eval)) == a);
  // Inference only.
  CHECK_THROWS_AS(chained.backward(fp32.forward(tokens, n, eval), n), Error);
  eval.training = true;
  CHECK_THROWS_AS(chained.forward(input, n, eval), Error);
}
