// The transformer layers of the GPT model: finite-difference gradient checks of every layer
// (input and every parameter, with and without dropout), causality of the attention, and the
// errors they raise. Loss L = sum(w * y) with fixed random w unless said otherwise.
#include "catch.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/core/error.hpp"
#include "trellis/kernels/attention/attention.hpp"
#include "trellis/kernels/dropout.hpp"
#include "trellis/kernels/layernorm.hpp"
#include "trellis/kernels/random_fill.hpp"
#include "trellis/kernels/views.hpp"
#include "trellis/nn/attention.hpp"
#include "trellis/nn/embedding.hpp"
#include "trellis/nn/layernorm.hpp"
#include "trellis/nn/transformer.hpp"

#include <cmath>
#include <functional>
#include <string>
#include <vector>

using namespace trellis;
using trellis::kernels::first_rows;
using trellis::test::check_gradient;
using trellis::test::gradcheck_layer;
using trellis::test::random_values;
using trellis::test::to_device;
using trellis::test::to_host;
using trellis::test::weighted_sum;

namespace {

// Overwrites every parameter with U(-0.5, 0.5) draws (LayerNorm gains near 1), so no check
// passes merely because a bias is 0 or a gain is 1.
void randomize_parameters(nn::ParameterStore& store, std::uint64_t stream) {
  for (std::size_t i = 0; i < store.size(); ++i) {
    const auto& info = store.info(i);
    const bool gain = info.shape.size() == 1 && info.name.find("ln") != std::string::npos &&
                      info.name.size() > 7 && info.name.substr(info.name.size() - 7) == ".weight";
    kernels::fill_uniform(store.param_vector(i), gain ? 0.5f : -0.5f, gain ? 1.5f : 0.5f, 99,
                          stream + i);
  }
}

std::string error_text(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("Embedding gathers rows and scatters gradients deterministically", "[gpt][embedding]") {
  const int vocab = 7, dim = 3, n = 9;
  nn::ParameterStore store;
  nn::Embedding wte(store, "wte", vocab, dim, /*capacity=*/12);
  store.finalize(3);
  CHECK(store.info(0).name == "wte.weight");
  CHECK(store.info(0).shape == Shape{vocab, dim});
  CHECK_FALSE(store.info(0).weight_decay);
  CHECK(store.info(0).init.kind == nn::InitSpec::Kind::normal);
  CHECK(store.info(0).init.stddev == Approx(0.02));

  // Repeated ids (2 three times, 5 twice) exercise the accumulation.
  IntView tokens = test::labels_to_device({2, 5, 0, 2, 6, 5, 2, 1, 3});
  const std::vector<float> w = random_values(n * dim, 7);
  auto loss = [&] {
    wte.forward(tokens, n, {});
    return weighted_sum(first_rows(wte.output(), n), w);
  };
  loss();
  const auto table = to_host(store.param(0));
  const auto out = to_host(first_rows(wte.output(), n));
  const std::vector<int> ids{2, 5, 0, 2, 6, 5, 2, 1, 3};
  for (int r = 0; r < n; ++r) {
    for (int j = 0; j < dim; ++j) CHECK(out[r * dim + j] == table[ids[r] * dim + j]);
  }
  FloatView dy = to_device("dy", w);
  wte.backward(as_matrix(dy, n, dim), n);
  const auto grad = to_host(store.grad(0));
  check_gradient("wte.weight", store.param(0), grad, loss);
  // Gradient accumulates (+=) and is bitwise reproducible.
  wte.backward(as_matrix(dy, n, dim), n);
  const auto twice = to_host(store.grad(0));
  for (std::size_t i = 0; i < grad.size(); ++i) CHECK(twice[i] == 2.0f * grad[i]);
}

TEST_CASE("Embedding rejects token ids outside the vocabulary", "[gpt][embedding]") {
  nn::ParameterStore store;
  nn::Embedding wte(store, "wte", 5, 2, 8);
  store.finalize(1);
  IntView high = test::labels_to_device({0, 4, 1, 5, 9});
  const std::string text = error_text([&] { wte.forward(high, 5, {}); });
  CHECK(contains(text, "token id 5 at position 3"));
  CHECK(contains(text, "[0, 5)"));
  CHECK(contains(text, "wte"));
  CHECK_THROWS_AS(wte.forward(high, 5, {}), InputError);
  IntView negative = test::labels_to_device({-1});
  CHECK_THROWS_AS(wte.forward(negative, 1, {}), InputError);
  // Only the first n ids are read.
  CHECK_NOTHROW(wte.forward(high, 3, {}));
}

TEST_CASE("PositionalEmbedding gradients match finite differences", "[gpt][embedding][gradcheck]") {
  const int T = 3, dim = 4, n = 2 * T;
  nn::ParameterStore store;
  nn::PositionalEmbedding wpe(store, "wpe", T, dim, /*capacity=*/3 * T);
  store.finalize(5);
  CHECK(store.info(0).name == "wpe.weight");
  CHECK(store.info(0).shape == Shape{T, dim});
  CHECK_FALSE(store.info(0).weight_decay);
  gradcheck_layer(wpe, store, n, random_values(n * dim, 11), {});
  // y[r] = x[r] + P[r % T]
  FloatView x = to_device("x", random_values(n * dim, 11));
  wpe.forward(as_matrix(x, n, dim), n, {});
  const auto y = to_host(first_rows(wpe.output(), n));
  const auto xs = to_host(x);
  const auto p = to_host(store.param(0));
  for (int r = 0; r < n; ++r) {
    for (int j = 0; j < dim; ++j) CHECK(y[r * dim + j] == xs[r * dim + j] + p[(r % T) * dim + j]);
  }
  CHECK_THROWS(wpe.forward(as_matrix(x, n, dim), n - 1, {}));  // no whole sequences
}

TEST_CASE("LayerNorm gradients match finite differences", "[gpt][layernorm][gradcheck]") {
  nn::ParameterStore store;
  nn::LayerNorm ln(store, "ln", 6, /*capacity_rows=*/5);
  store.finalize(2);
  CHECK(store.info(0).name == "ln.weight");
  CHECK(store.info(1).name == "ln.bias");
  CHECK_FALSE(store.info(0).weight_decay);
  CHECK(to_host(store.param(0)) == std::vector<float>(6, 1.0f));
  CHECK(to_host(store.param(1)) == std::vector<float>(6, 0.0f));
  randomize_parameters(store, 10);
  gradcheck_layer(ln, store, 4, random_values(24, 12, -2.0f, 2.0f), {});

  // With unit gain and zero bias every output row has mean 0 and (biased) variance ~1.
  nn::ParameterStore plain;
  nn::LayerNorm unit(plain, "ln", 6, 5);
  plain.finalize(2);
  FloatView x = to_device("x", random_values(30, 13, -3.0f, 5.0f));
  unit.forward(as_matrix(x, 5, 6), 5, {});
  const auto y = to_host(first_rows(unit.output(), 5));
  for (int r = 0; r < 5; ++r) {
    double mean = 0, var = 0;
    for (int j = 0; j < 6; ++j) mean += y[r * 6 + j] / 6.0;
    for (int j = 0; j < 6; ++j) var += (y[r * 6 + j] - mean) * (y[r * 6 + j] - mean) / 6.0;
    CHECK(mean == Approx(0.0).margin(1e-6));
    CHECK(var == Approx(1.0).epsilon(1e-3));
  }
}

TEST_CASE("CausalSelfAttention gradients match finite differences", "[gpt][attention][gradcheck]") {
  const int d = 8, heads = 2, T = 5, n = 2 * T;
  for (float p : {0.0f, 0.3f}) {
    nn::ParameterStore store;
    nn::CausalSelfAttention attn(store, "attn", d, heads, T, /*capacity_rows=*/3 * T, p);
    store.finalize(4);
    REQUIRE(store.size() == 4);
    CHECK(store.info(0).name == "attn.c_attn.weight");
    CHECK(store.info(0).shape == Shape{3 * d, d});
    CHECK(store.info(0).weight_decay);
    CHECK_FALSE(store.info(1).weight_decay);
    CHECK(store.info(2).name == "attn.c_proj.weight");
    randomize_parameters(store, 20);
    INFO("dropout " << p);
    // Training context: sequence 3 of the global batch, so first_sample = 3 * T token rows.
    gradcheck_layer(attn, store, n, random_values(n * d, 14, -1.5f, 1.5f),
                    nn::StepContext{8, 2, 3 * T, true});
  }
}

TEST_CASE("CausalSelfAttention: no position sees a later one", "[gpt][attention]") {
  const int d = 8, heads = 2, T = 6, n = 2 * T;
  nn::ParameterStore store;
  nn::CausalSelfAttention attn(store, "attn", d, heads, T, n, 0.0f);
  store.finalize(4);
  randomize_parameters(store, 30);
  const auto x_host = random_values(n * d, 15);
  FloatView x = to_device("x", x_host);
  attn.forward(as_matrix(x, n, d), n, {});
  const auto before = to_host(first_rows(attn.output(), n));

  // The flash kernel keeps no probabilities, only each softmax row's logsumexp (its
  // agreement with the materialised softmax is tested in test_flash_attention.cpp); a row that
  // sees only itself (t = 0) has one score, so lse_0 equals that score, finite.
  const auto lse = to_host(attn.logsumexp());
  REQUIRE(lse.size() == static_cast<std::size_t>(n / T * heads * T));
  for (float v : lse) CHECK(std::isfinite(v));

  // Perturbing token t' = 3 of sequence 1 changes nothing at its positions < t', nor sequence 0.
  const int b = 1, t_changed = 3;
  auto x2 = x_host;
  for (int j = 0; j < d; ++j) x2[(b * T + t_changed) * d + j] += 0.7f;
  FloatView xp = to_device("x2", x2);
  attn.forward(as_matrix(xp, n, d), n, {});
  const auto after = to_host(first_rows(attn.output(), n));
  for (int r = 0; r < n; ++r) {
    const bool earlier = r < b * T + t_changed;
    double diff = 0;
    for (int j = 0; j < d; ++j) diff += std::fabs(after[r * d + j] - before[r * d + j]);
    INFO("row " << r);
    if (earlier) {
      CHECK(diff == 0.0);
    } else {
      CHECK(diff > 1e-4);
    }
  }

  // Gradient view of the same fact: a loss on output row (b, t) only reaches input rows <= t.
  const int t_loss = 2;
  std::vector<float> w(n * d, 0.0f);
  for (int j = 0; j < d; ++j) w[(b * T + t_loss) * d + j] = 1.0f;
  attn.forward(as_matrix(x, n, d), n, {});
  FloatView dy = to_device("dy", w);
  attn.backward(as_matrix(dy, n, d), n);
  const auto dx = to_host(first_rows(attn.input_grad(), n));
  for (int r = 0; r < n; ++r) {
    double mag = 0;
    for (int j = 0; j < d; ++j) mag += std::fabs(dx[r * d + j]);
    const bool reachable = r >= b * T && r <= b * T + t_loss;
    INFO("row " << r);
    if (reachable) {
      CHECK(mag > 0.0);
    } else {
      CHECK(mag == 0.0);
    }
  }
}

TEST_CASE("CausalSelfAttention rejects bad shapes", "[gpt][attention]") {
  nn::ParameterStore store;
  CHECK_THROWS_AS(nn::CausalSelfAttention(store, "a", 10, 3, 4, 8, 0.0f), ConfigError);
  CHECK_THROWS_AS(nn::CausalSelfAttention(store, "a", 8, 2, 4, 6, 0.0f), ConfigError);
  CHECK_THROWS_AS(nn::CausalSelfAttention(store, "a", 8, 2, 4, 8, 1.0f), ConfigError);
  CHECK(store.size() == 0);  // nothing registered by a rejected layer
  nn::CausalSelfAttention attn(store, "a", 8, 2, 4, 8, 0.0f);
  store.finalize(1);
  FloatView x("x", 64);
  CHECK_THROWS(attn.forward(as_matrix(x, 8, 8), 6, {}));  // 6 rows: no whole sequences
}

TEST_CASE("FeedForward (the GPT MLP) gradients match finite differences", "[gpt][mlp][gradcheck]") {
  const int d = 6, n = 5;
  for (float p : {0.0f, 0.25f}) {
    nn::ParameterStore store;
    const nn::TransformerInit init{0.02, 0.005};
    nn::FeedForward mlp(store, "mlp", d, /*capacity_rows=*/8, p, init);
    store.finalize(6);
    REQUIRE(store.size() == 4);
    CHECK(store.info(0).name == "mlp.c_fc.weight");
    CHECK(store.info(0).shape == Shape{4 * d, d});
    CHECK(store.info(0).init.stddev == Approx(0.02));
    CHECK(store.info(2).name == "mlp.c_proj.weight");
    CHECK(store.info(2).shape == Shape{d, 4 * d});
    CHECK(store.info(2).init.stddev == Approx(0.005));
    CHECK(store.info(3).init.kind == nn::InitSpec::Kind::zeros);
    CHECK(mlp.flops_per_sample() == 2 * 6 * 4 * d * d);
    randomize_parameters(store, 40);
    INFO("dropout " << p);
    gradcheck_layer(mlp, store, n, random_values(n * d, 16, -2.0f, 2.0f),
                    nn::StepContext{3, 7, 11, true});
  }
}

TEST_CASE("transformer Block gradients match finite differences", "[gpt][block][gradcheck]") {
  const int d = 8, heads = 2, T = 4, n = 2 * T;
  for (float p : {0.0f, 0.2f}) {
    nn::ParameterStore store;
    nn::Block block(store, "h.0", d, heads, T, /*capacity_rows=*/n, p);
    store.finalize(7);
    const std::vector<std::string> names{
        "h.0.ln_1.weight",      "h.0.ln_1.bias",          "h.0.attn.c_attn.weight",
        "h.0.attn.c_attn.bias", "h.0.attn.c_proj.weight", "h.0.attn.c_proj.bias",
        "h.0.ln_2.weight",      "h.0.ln_2.bias",          "h.0.mlp.c_fc.weight",
        "h.0.mlp.c_fc.bias",    "h.0.mlp.c_proj.weight",  "h.0.mlp.c_proj.bias"};
    REQUIRE(store.size() == names.size());
    for (std::size_t i = 0; i < names.size(); ++i) CHECK(store.info(i).name == names[i]);
    randomize_parameters(store, 50);
    INFO("dropout " << p);
    gradcheck_layer(block, store, n, random_values(n * d, 17, -1.5f, 1.5f),
                    nn::StepContext{5, 1, 2 * T, true}, /*eps=*/1e-2f);
  }
}

TEST_CASE("attention kernels: head layout and causal dropout", "[gpt][attention][kernels]") {
  const int n_seq = 2, T = 3, H = 2, hd = 2, d = H * hd, width = 3 * d, rows = n_seq * T;
  const auto rows_host = random_values(rows * width, 18);
  FloatView src = to_device("rows", rows_host);
  const ConstMatrix m(src.data(), rows, width);
  FloatView heads("heads", rows * d);
  // k block (columns [d, 2d)) in PyTorch's view(B, T, H, hd).transpose(1, 2) order.
  kernels::split_heads(m, d, d, H, T, heads);
  const auto h = to_host(heads);
  for (int b = 0; b < n_seq; ++b)
    for (int hh = 0; hh < H; ++hh)
      for (int t = 0; t < T; ++t)
        for (int i = 0; i < hd; ++i) {
          CHECK(h[((b * H + hh) * T + t) * hd + i] ==
                rows_host[(b * T + t) * width + d + hh * hd + i]);
        }
  // merge_heads is its inverse on those columns and leaves the others alone.
  FloatView back = to_device("back", std::vector<float>(rows * width, -7.0f));
  kernels::merge_heads(heads, d, H, T, Matrix(back.data(), rows, width), d);
  const auto b_host = to_host(back);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < width; ++c) {
      const bool merged = c >= d && c < 2 * d;
      CHECK(b_host[r * width + c] == (merged ? rows_host[r * width + c] : -7.0f));
    }

  // causal_dropout_apply == dropout_apply below the diagonal, 0 above it.
  const int S = 5, m_rows = 3 * S;
  FloatView x = to_device("x", random_values(m_rows * S, 19));
  FloatView full("full", m_rows * S), causal("causal", m_rows * S);
  const kernels::DropoutMask mask{0.4f, 3, 99, 1000};
  kernels::dropout_apply(ConstMatrix(x.data(), m_rows, S), Matrix(full.data(), m_rows, S), mask);
  kernels::causal_dropout_apply(ConstMatrix(x.data(), m_rows, S), Matrix(causal.data(), m_rows, S),
                                mask);
  const auto f = to_host(full), c = to_host(causal);
  int dropped = 0;
  for (int r = 0; r < m_rows; ++r)
    for (int j = 0; j < S; ++j) {
      CHECK(c[r * S + j] == (j <= r % S ? f[r * S + j] : 0.0f));
      dropped += j <= r % S && c[r * S + j] == 0.0f;
    }
  CHECK(dropped > 0);
}

TEST_CASE("LayerNorm kernel is accurate for rows with a large mean", "[gpt][layernorm][kernels]") {
  // Two-pass statistics: mean 100, spread 0.1, where E[x^2] - E[x]^2 in float would lose
  // about 10% of the variance to cancellation.
  const int d = 16;
  std::vector<float> x = random_values(d, 21, 99.9f, 100.1f);
  FloatView xv = to_device("x", x), yv("y", d), mean("mean", 1), rstd("rstd", 1);
  FloatView gamma = to_device("g", std::vector<float>(d, 1.0f)), beta("b", d);
  kernels::layernorm_forward(ConstMatrix(xv.data(), 1, d), gamma, beta, 1e-5f,
                             Matrix(yv.data(), 1, d), mean, rstd);
  const auto y = to_host(yv);
  double mu = 0, var = 0;  // in double from the float inputs
  for (int j = 0; j < d; ++j) mu += static_cast<double>(x[j]) / d;
  for (int j = 0; j < d; ++j) var += (x[j] - mu) * (x[j] - mu) / d;
  for (int j = 0; j < d; ++j) {
    const double want = (x[j] - mu) / std::sqrt(var + 1e-5);
    CHECK(y[j] == Approx(want).margin(1e-3));
  }
}
