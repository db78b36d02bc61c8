// The whole GPT model: its parameters, spec validation, finite-difference gradients through the
// tied head (dropout off and on), causality at the token level, eval mode with n = 1, and the
// split invariance that data parallelism relies on.
#include "catch.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/core/error.hpp"
#include "trellis/kernels/random_fill.hpp"
#include "trellis/kernels/softmax_xent.hpp"
#include "trellis/kernels/views.hpp"
#include "trellis/nn/gpt.hpp"

#include <cmath>
#include <string>
#include <vector>

using namespace trellis;
using trellis::kernels::first_rows;
using trellis::test::to_host;

namespace {

nn::GptSpec tiny_spec(float dropout) {
  nn::GptSpec spec;
  spec.n_layer = 2;
  spec.n_head = 2;
  spec.d_model = 8;
  spec.seq_len = 5;
  spec.vocab = 11;
  spec.dropout = dropout;
  spec.capacity = 4;
  return spec;
}

std::vector<std::int32_t> random_tokens(std::size_t count, int vocab, std::uint64_t stream) {
  std::vector<std::int32_t> t(count);
  for (std::size_t i = 0; i < count; ++i) {
    t[i] = static_cast<std::int32_t>(random_uniform(4321, stream, i) * static_cast<float>(vocab));
  }
  return t;
}

// U(-0.5, 0.5) parameters, LayerNorm gains in (0.5, 1.5): larger than GPT-2's init, so every
// term of the gradient is exercised.
void randomize_parameters(nn::ParameterStore& store, std::uint64_t stream) {
  for (std::size_t i = 0; i < store.size(); ++i) {
    const std::string& name = store.info(i).name;
    const bool gain =
        name.find("ln_") != std::string::npos && name.substr(name.size() - 7) == ".weight";
    kernels::fill_uniform(store.param_vector(i), gain ? 0.5f : -0.5f, gain ? 1.5f : 0.5f, 77,
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

}  // namespace

TEST_CASE("Gpt registers nanoGPT's parameters with GPT-2 init", "[gpt][model]") {
  nn::ParameterStore store;
  nn::GptSpec spec = tiny_spec(0.1f);
  nn::Gpt gpt(spec, store);
  const int d = 8, V = 11, T = 5, L = 2;
  std::vector<std::pair<std::string, Shape>> expected{{"wte.weight", {V, d}},
                                                      {"wpe.weight", {T, d}}};
  for (int i = 0; i < L; ++i) {
    const std::string h = "h." + std::to_string(i) + ".";
    for (auto [name, shape] :
         std::vector<std::pair<std::string, Shape>>{{"ln_1.weight", {d}},
                                                    {"ln_1.bias", {d}},
                                                    {"attn.c_attn.weight", {3 * d, d}},
                                                    {"attn.c_attn.bias", {3 * d}},
                                                    {"attn.c_proj.weight", {d, d}},
                                                    {"attn.c_proj.bias", {d}},
                                                    {"ln_2.weight", {d}},
                                                    {"ln_2.bias", {d}},
                                                    {"mlp.c_fc.weight", {4 * d, d}},
                                                    {"mlp.c_fc.bias", {4 * d}},
                                                    {"mlp.c_proj.weight", {d, 4 * d}},
                                                    {"mlp.c_proj.bias", {d}}}) {
      expected.emplace_back(h + name, shape);
    }
  }
  expected.emplace_back("ln_f.weight", Shape{d});
  expected.emplace_back("ln_f.bias", Shape{d});
  REQUIRE(store.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto& info = store.info(i);
    INFO(info.name);
    CHECK(info.name == expected[i].first);
    CHECK(info.shape == expected[i].second);
    const bool matrix = info.shape.size() == 2;
    const bool embedding = info.name == "wte.weight" || info.name == "wpe.weight";
    CHECK(info.weight_decay == (matrix && !embedding));
    if (matrix) {
      CHECK(info.init.kind == nn::InitSpec::Kind::normal);
      const bool proj = info.name.find("c_proj.weight") != std::string::npos;
      CHECK(info.init.stddev == Approx(proj ? 0.02 / std::sqrt(2.0 * L) : 0.02));
    } else if (info.name.find("ln_") == std::string::npos ||
               info.name.substr(info.name.size() - 5) == ".bias") {
      CHECK(info.init.kind == nn::InitSpec::Kind::zeros);
    } else {
      CHECK(info.init.kind == nn::InitSpec::Kind::constant);
      CHECK(info.init.value == 1.0);
    }
  }
  CHECK(gpt.num_matmul_params() == store.num_elements() - T * d);  // all but wpe
  CHECK(gpt.flops_per_sample() ==
        6 * gpt.num_matmul_params() * T + 12 * std::int64_t{L} * d * T * T);
  CHECK(gpt.describe() == "gpt L2 H2 D8 T5 V11");
  CHECK(gpt.takes_tokens());
  CHECK(gpt.rows_per_sample() == T);
  CHECK(gpt.classes() == V);
  CHECK(gpt.capacity() == 4);

  nn::ParameterStore prefixed;
  nn::Gpt named(spec, prefixed, "lm.");
  CHECK(prefixed.info(0).name == "lm.wte.weight");
  CHECK(prefixed.info(prefixed.size() - 1).name == "lm.ln_f.bias");
}

TEST_CASE("Gpt rejects bad specs with ConfigError naming the key", "[gpt][model]") {
  nn::ParameterStore store;
  auto rejects = [&](nn::GptSpec spec, const std::string& key) {
    INFO(key);
    CHECK_THROWS_AS(nn::Gpt(spec, store), ConfigError);
    CHECK(error_text([&] { nn::Gpt(spec, store); }).find(key) != std::string::npos);
  };
  auto spec = tiny_spec(0.0f);
  spec.n_head = 3;  // 8 % 3 != 0
  rejects(spec, "model.n_head");
  spec = tiny_spec(0.0f);
  spec.d_model = 0;
  rejects(spec, "model.d_model");
  spec = tiny_spec(0.0f);
  spec.seq_len = 0;
  rejects(spec, "model.seq_len");
  spec = tiny_spec(0.0f);
  spec.vocab = -1;
  rejects(spec, "model.vocab");
  spec = tiny_spec(0.0f);
  spec.n_layer = 0;
  rejects(spec, "model.n_layer");
  spec = tiny_spec(1.0f);
  rejects(spec, "model.dropout");
  spec = tiny_spec(0.0f);
  spec.capacity = 0;
  rejects(spec, "capacity");
  CHECK(store.size() == 0);  // nothing registered by a rejected spec
}

TEST_CASE("Gpt rejects out-of-range tokens with InputError", "[gpt][model]") {
  nn::ParameterStore store;
  nn::Gpt gpt(tiny_spec(0.0f), store);
  store.finalize(1);
  auto tokens = random_tokens(10, 11, 1);
  tokens[7] = 11;
  IntView t = test::labels_to_device(tokens);
  CHECK_THROWS_AS(gpt.forward(t, 2, {}), InputError);
  const std::string text = error_text([&] { gpt.forward(t, 2, {}); });
  CHECK(text.find("token id 11 at position 7") != std::string::npos);
  FloatView dl("dl", 10 * 11);
  CHECK_THROWS(gpt.backward(as_matrix(dl, 10, 11), 2));  // no forward completed
  CHECK_THROWS_AS(gpt.forward(t, 3, {}), Error);         // 10 ids for 3 sequences of 5
  CHECK_THROWS_AS(gpt.forward(t, 5, {}), Error);         // capacity is 4
}

TEST_CASE("whole Gpt gradient (tied head) matches finite differences", "[gpt][model][gradcheck]") {
  for (float p : {0.0f, 0.2f}) {
    INFO("dropout " << p);
    nn::ParameterStore store;
    const auto spec = tiny_spec(p);
    nn::Gpt gpt(spec, store);
    store.finalize(9);
    randomize_parameters(store, 100);
    const int n = 2, rows = n * spec.seq_len;
    IntView tokens = test::labels_to_device(random_tokens(rows, spec.vocab, 2));
    IntView targets = test::labels_to_device(random_tokens(rows, spec.vocab, 3));
    const nn::StepContext ctx{31, 4, /*first_sample=*/1, true};
    FloatView dlogits("dlogits", static_cast<std::size_t>(rows * spec.vocab));
    auto loss = [&] {  // sum of the cross-entropies (scale 1: well above finite-difference noise)
      const ConstMatrix logits = gpt.forward(tokens, n, ctx);
      return kernels::softmax_xent_forward(logits, targets).loss_sum;
    };
    loss();
    kernels::softmax_xent_backward(gpt.forward(tokens, n, ctx), targets, 1.0f,
                                   as_matrix(dlogits, rows, spec.vocab));
    store.zero_grads();
    gpt.backward(as_matrix(dlogits, rows, spec.vocab), n);
    std::vector<std::vector<float>> grads;
    for (std::size_t i = 0; i < store.size(); ++i) grads.push_back(to_host(store.grad(i)));
    for (std::size_t i = 0; i < store.size(); ++i) {
      test::check_gradient(store.info(i).name, store.param(i), grads[i], loss, 1e-2f);
    }
  }
}

TEST_CASE("Gpt is causal over tokens and works one sequence at a time in eval", "[gpt][model]") {
  nn::ParameterStore store;
  const auto spec = tiny_spec(0.3f);
  nn::Gpt gpt(spec, store);
  store.finalize(12);
  randomize_parameters(store, 200);
  const int T = spec.seq_len, V = spec.vocab;
  const auto tokens = random_tokens(2 * T, V, 5);
  IntView both = test::labels_to_device(tokens);
  const nn::StepContext eval{1, 0, 0, false};
  const auto logits2 = to_host(gpt.forward(both, 2, eval));

  // n = 1, eval: each sequence alone gives the rows it had in the batch of 2.
  for (int b = 0; b < 2; ++b) {
    IntView one = test::labels_to_device(
        std::vector<std::int32_t>(tokens.begin() + b * T, tokens.begin() + (b + 1) * T));
    const auto logits1 = to_host(gpt.forward(one, 1, {9, 3, 7, false}));  // seed/step/first unused
    REQUIRE(logits1.size() == static_cast<std::size_t>(T * V));
    for (int i = 0; i < T * V; ++i)
      CHECK(logits1[i] == Approx(logits2[b * T * V + i]).margin(1e-5));
  }
  // Eval mode ignores dropout and the context: repeated calls agree exactly.
  CHECK(to_host(gpt.forward(both, 2, {5, 6, 0, false})) == logits2);

  // Changing the token at position 3 of sequence 0 leaves positions 0..2 of it (and sequence 1)
  // unchanged, in training mode too (same context).
  const nn::StepContext train{1, 0, 0, true};
  const auto base = to_host(gpt.forward(both, 2, train));
  auto changed = tokens;
  changed[3] = (changed[3] + 1) % V;
  IntView other = test::labels_to_device(changed);
  const auto after = to_host(gpt.forward(other, 2, train));
  for (int r = 0; r < 2 * T; ++r) {
    double diff = 0;
    for (int j = 0; j < V; ++j) diff += std::fabs(after[r * V + j] - base[r * V + j]);
    INFO("row " << r);
    if (r < 3 || r >= T) {
      CHECK(diff == 0.0);
    } else {
      CHECK(diff > 0.0);
    }
  }
}

TEST_CASE("Gpt loss and gradients of a batch equal the sum over its parts", "[gpt][model]") {
  // The data-parallel contract: with first_sample set and scale = 1 / (global rows), a batch of
  // 4 sequences in one call equals two calls of 2 (dropout on), up to summation order.
  const auto spec = tiny_spec(0.25f);
  const int T = spec.seq_len, V = spec.vocab, n = 4;
  IntView tokens = test::labels_to_device(random_tokens(n * T, V, 8));
  IntView targets = test::labels_to_device(random_tokens(n * T, V, 9));
  const float scale = 1.0f / static_cast<float>(n * T);

  auto run = [&](const std::vector<std::pair<int, int>>& parts, double& loss_sum) {
    nn::ParameterStore store;
    nn::Gpt gpt(spec, store);
    store.finalize(21);
    randomize_parameters(store, 300);
    FloatView dlogits("dlogits", static_cast<std::size_t>(spec.capacity * T * V));
    loss_sum = 0;
    for (auto [first, count] : parts) {
      const nn::StepContext ctx{17, 3, first, true};
      const kernels::ConstLabels tk(tokens.data() + first * T, static_cast<std::size_t>(count * T));
      const kernels::ConstLabels tg(targets.data() + first * T,
                                    static_cast<std::size_t>(count * T));
      const ConstMatrix logits = gpt.forward(tk, count, ctx);
      loss_sum += kernels::softmax_xent_forward(logits, tg).loss_sum;
      const Matrix dl = as_matrix(dlogits, count * T, V);
      kernels::softmax_xent_backward(logits, tg, scale, dl);
      gpt.backward(dl, count);
    }
    return to_host(store.grads());
  };
  double whole_loss = 0, split_loss = 0;
  const auto whole = run({{0, 4}}, whole_loss);
  const auto split = run({{0, 2}, {2, 2}}, split_loss);
  CHECK(split_loss == Approx(whole_loss).epsilon(1e-6));
  REQUIRE(whole.size() == split.size());
  double max_grad = 0;
  for (float g : whole) max_grad = std::fmax(max_grad, std::fabs(g));
  CHECK(max_grad > 1e-3);
  for (std::size_t i = 0; i < whole.size(); ++i) {
    INFO("gradient element " << i);
    CHECK(split[i] == Approx(whole[i]).epsilon(1e-5).margin(1e-6));
  }
  // A different split point (1 + 3) agrees as well.
  double other_loss = 0;
  const auto other = run({{0, 1}, {1, 3}}, other_loss);
  CHECK(other_loss == Approx(whole_loss).epsilon(1e-6));
  for (std::size_t i = 0; i < whole.size(); ++i) {
    CHECK(other[i] == Approx(whole[i]).epsilon(1e-5).margin(1e-6));
  }
  // And dropout really is on: the same batch in eval mode has another loss.
  nn::ParameterStore store;
  nn::Gpt gpt(spec, store);
  store.finalize(21);
  randomize_parameters(store, 300);
  const double eval_loss =
      kernels::softmax_xent_forward(gpt.forward(tokens, n, {17, 3, 0, false}), targets).loss_sum;
  CHECK(std::fabs(eval_loss - whole_loss) > 1e-3);
}
