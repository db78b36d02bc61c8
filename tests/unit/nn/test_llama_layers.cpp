// The Llama-family options of the decoder (nn/decoder_spec.hpp): the SwiGLU MLP, RMSNorm,
// rotary positions, grouped-query attention, no biases, an untied head. Their parameters
// (names, shapes, init), finite-difference gradients of each layer and of the whole model, and
// causality with rotary positions. Loss L = sum(w * y) with fixed random w unless said otherwise.
#include "catch.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/core/error.hpp"
#include "trellis/kernels/random_fill.hpp"
#include "trellis/kernels/softmax_xent.hpp"
#include "trellis/nn/attention.hpp"
#include "trellis/nn/gpt.hpp"
#include "trellis/nn/layernorm.hpp"
#include "trellis/nn/transformer.hpp"

#include <cmath>
#include <string>
#include <vector>

using namespace trellis;
using trellis::kernels::first_rows;
using trellis::test::gradcheck_layer;
using trellis::test::random_values;
using trellis::test::to_device;
using trellis::test::to_host;

namespace {

// U(-0.5, 0.5) parameters, norm gains in (0.5, 1.5).
void randomize_parameters(nn::ParameterStore& store, std::uint64_t stream) {
  for (std::size_t i = 0; i < store.size(); ++i) {
    const std::string& name = store.info(i).name;
    const bool gain = store.info(i).shape.size() == 1 && name.find("ln_") != std::string::npos;
    kernels::fill_uniform(store.param_vector(i), gain ? 0.5f : -0.5f, gain ? 1.5f : 0.5f, 99,
                          stream + i);
  }
}

nn::BlockSpec llama_block(int d, int heads, int kv_heads, int T, const nn::RotaryTables* rope) {
  nn::BlockSpec s = nn::BlockSpec::gpt2(d, heads, T, 0.0f);
  s.n_kv_head = kv_heads;
  s.d_ff = 12;
  s.mlp = nn::MlpKind::swiglu;
  s.norm = nn::NormKind::rmsnorm;
  s.norm_eps = 1e-6f;
  s.bias = false;
  s.rope = rope;
  return s;
}

std::vector<std::int32_t> random_tokens(std::size_t count, int vocab, std::uint64_t stream) {
  std::vector<std::int32_t> t(count);
  for (std::size_t i = 0; i < count; ++i)
    t[i] = static_cast<std::int32_t>(random_uniform(4321, stream, i) * static_cast<float>(vocab));
  return t;
}

}  // namespace

TEST_CASE("RMSNorm registers only its gain and its gradients match finite differences",
          "[llama][rmsnorm][gradcheck]") {
  nn::ParameterStore store;
  nn::LayerNorm norm(store, "ln_1", 6, 5, 1e-6f, nn::NormKind::rmsnorm);
  store.finalize(2);
  REQUIRE(store.size() == 1);
  CHECK(store.info(0).name == "ln_1.weight");
  CHECK_FALSE(norm.bias_index());
  randomize_parameters(store, 10);
  gradcheck_layer(norm, store, 5, random_values(30, 11, -2.0f, 2.0f), {});
  CHECK_THROWS_AS(nn::parse_norm_kind("batchnorm"), ConfigError);
}

TEST_CASE(
    "SwiGLU FeedForward: [gate; up] in one Linear, no biases, gradients match finite "
    "differences",
    "[llama][mlp][gradcheck]") {
  const int d = 6, n = 5;
  nn::ParameterStore store;
  const nn::TransformerInit init{0.02, 0.02};
  nn::FeedForward mlp(store, "mlp", llama_block(d, 2, 2, 5, nullptr), 8, init);
  store.finalize(3);
  REQUIRE(store.size() == 2);
  CHECK(store.info(0).name == "mlp.c_fc.weight");
  CHECK(store.info(0).shape == Shape{2 * 12, d});
  CHECK(store.info(1).name == "mlp.c_proj.weight");
  CHECK(store.info(1).shape == Shape{d, 12});
  CHECK(mlp.flops_per_sample() == 6 * (2 * 12 * d + 12 * d));
  randomize_parameters(store, 20);
  gradcheck_layer(mlp, store, n, random_values(n * d, 21, -2.0f, 2.0f), {});
}

TEST_CASE(
    "Llama block (RMSNorm, rotary, grouped-query attention, SwiGLU, no biases): "
    "parameters and gradients",
    "[llama][block][gradcheck]") {
  const int d = 16, heads = 4, T = 5, n = 2 * T;
  const nn::RotaryTables rope(kernels::RopeSpec{}, d / heads, T);
  for (int kv : {4, 2, 1}) {
    INFO("kv heads " << kv);
    nn::ParameterStore store;
    nn::Block block(store, "h.0", llama_block(d, heads, kv, T, &rope), n);
    store.finalize(4);
    const std::vector<std::string> names{"h.0.ln_1.weight",        "h.0.attn.c_attn.weight",
                                         "h.0.attn.c_proj.weight", "h.0.ln_2.weight",
                                         "h.0.mlp.c_fc.weight",    "h.0.mlp.c_proj.weight"};
    REQUIRE(store.size() == names.size());
    for (std::size_t i = 0; i < names.size(); ++i) CHECK(store.info(i).name == names[i]);
    CHECK(store.info(1).shape == Shape{(heads + 2 * kv) * (d / heads), d});
    randomize_parameters(store, 30);
    gradcheck_layer(block, store, n, random_values(n * d, 31, -1.5f, 1.5f), {}, 1e-2f);
  }
}

TEST_CASE("Rotary attention is causal, and turns nothing at position 0 only",
          "[llama][attention]") {
  const int d = 8, heads = 2, T = 6, n = T;
  const nn::RotaryTables rope(kernels::RopeSpec{}, d / heads, T);
  nn::ParameterStore store, plain_store;
  nn::CausalSelfAttention attn(store, "attn", llama_block(d, heads, 1, T, &rope), n);
  nn::CausalSelfAttention plain(plain_store, "attn", llama_block(d, heads, 1, T, nullptr), n);
  store.finalize(4);
  plain_store.finalize(4);
  randomize_parameters(store, 40);
  randomize_parameters(plain_store, 40);  // the same weights
  const std::vector<float> xs = random_values(n * d, 41);
  FloatView x = to_device("x", xs);
  attn.forward(as_matrix(x, n, d), n, {});
  const std::vector<float> y = to_host(first_rows(attn.output(), n));
  plain.forward(as_matrix(x, n, d), n, {});
  const std::vector<float> y_plain = to_host(first_rows(plain.output(), n));
  // Row 0 sees only itself at angle 0: the rotation is the identity there. Every later row
  // scores keys at other positions, which the rotation turns by their distance.
  for (int j = 0; j < d; ++j) CHECK(y[j] == Approx(y_plain[j]).margin(1e-6));
  for (int t = 1; t < T; ++t) {
    double diff = 0;
    for (int j = 0; j < d; ++j) diff += std::abs(y[t * d + j] - y_plain[t * d + j]);
    CHECK(diff > 1e-4);
  }
  // Changing the last token moves no earlier row.
  std::vector<float> changed = xs;
  for (int j = 0; j < d; ++j) changed[(T - 1) * d + j] += 1.0f;
  FloatView x2 = to_device("x2", changed);
  attn.forward(as_matrix(x2, n, d), n, {});
  const std::vector<float> y2 = to_host(first_rows(attn.output(), n));
  for (int e = 0; e < (T - 1) * d; ++e) CHECK(y2[e] == y[e]);
}

TEST_CASE(
    "Llama-shaped Gpt: no position table, an untied lm_head, gradients match finite "
    "differences",
    "[llama][model][gradcheck]") {
  nn::GptSpec spec;
  spec.n_layer = 2, spec.n_head = 4, spec.n_kv_head = 2, spec.d_model = 8, spec.seq_len = 5;
  spec.vocab = 11, spec.capacity = 2, spec.d_ff = 12;
  spec.positions = nn::Positions::rope;
  spec.norm = nn::NormKind::rmsnorm;
  spec.mlp = nn::MlpKind::swiglu;
  spec.bias = false, spec.tied_head = false, spec.scaled_residual_init = false;
  nn::ParameterStore store;
  nn::Gpt gpt(spec, store);
  store.finalize(5);
  std::vector<std::string> names;
  for (std::size_t i = 0; i < store.size(); ++i) names.push_back(store.info(i).name);
  CHECK(names.front() == "wte.weight");
  CHECK(names.back() == "lm_head.weight");
  CHECK(names[names.size() - 2] == "ln_f.weight");
  CHECK(names.size() == 1 + 2 * 6 + 2);
  CHECK(store.info(store.size() - 1).init.stddev == Approx(0.02));
  CHECK(gpt.wpe() == nullptr);
  CHECK(gpt.tied_parameters().empty());
  std::int64_t total = 0;
  for (std::size_t i = 0; i < store.size(); ++i)
    total += static_cast<std::int64_t>(store.info(i).numel);
  CHECK(static_cast<long double>(total) == nn::gpt_num_params(spec));
  CHECK(gpt.describe() == "gpt L2 H4 D8 T5 V11 KV2 F12 rope rmsnorm swiglu nobias untied");
  randomize_parameters(store, 50);
  const int n = 2, rows = n * spec.seq_len;
  IntView tokens = test::labels_to_device(random_tokens(rows, spec.vocab, 2));
  IntView targets = test::labels_to_device(random_tokens(rows, spec.vocab, 3));
  FloatView dlogits("dlogits", static_cast<std::size_t>(rows * spec.vocab));
  auto loss = [&] {
    return kernels::softmax_xent_forward(gpt.forward(tokens, n, {}), targets).loss_sum;
  };
  kernels::softmax_xent_backward(gpt.forward(tokens, n, {}), targets, 1.0f,
                                 as_matrix(dlogits, rows, spec.vocab));
  store.zero_grads();
  gpt.backward(as_matrix(dlogits, rows, spec.vocab), n);
  std::vector<std::vector<float>> grads;
  for (std::size_t i = 0; i < store.size(); ++i) grads.push_back(to_host(store.grad(i)));
  for (std::size_t i = 0; i < store.size(); ++i)
    test::check_gradient(store.info(i).name, store.param(i), grads[i], loss, 1e-2f);
}
