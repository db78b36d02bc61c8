// Generation with key/value caches (Gpt::forward_cached): a prompt prefilled in one call and
// then one token per call gives, row for row, the logits of the full-window forward that
// recomputes everything, for GPT-2 (learned positions, multi-head) and Llama (rotary
// positions, grouped-query) models; and greedy decoding picks the same tokens both ways.
#include "catch.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/core/error.hpp"
#include "trellis/kernels/random_fill.hpp"
#include "trellis/nn/gpt.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

using namespace trellis;

namespace {

nn::GptSpec spec_of(bool llama) {
  nn::GptSpec spec;
  spec.n_layer = 2, spec.n_head = 4, spec.d_model = 32, spec.seq_len = 24, spec.vocab = 29;
  spec.capacity = 1;
  if (llama) {
    spec.n_kv_head = 2, spec.d_ff = 40;
    spec.positions = nn::Positions::rope;
    spec.norm = nn::NormKind::rmsnorm;
    spec.mlp = nn::MlpKind::swiglu;
    spec.bias = false, spec.tied_head = false;
  }
  return spec;
}

void fill(nn::ParameterStore& store) {
  for (std::size_t i = 0; i < store.size(); ++i) {
    const std::string& name = store.info(i).name;
    const bool gain = store.info(i).shape.size() == 1 && name.find("ln_") != std::string::npos;
    kernels::fill_uniform(store.param_vector(i), gain ? 0.8f : -0.4f, gain ? 1.2f : 0.4f, 5, i);
  }
}

int argmax(const std::vector<float>& row) {
  return static_cast<int>(std::max_element(row.begin(), row.end()) - row.begin());
}

}  // namespace

TEST_CASE("cached generation gives the full forward's logits row for row",
          "[gpt][llama][kvcache]") {
  const bool llama = GENERATE(false, true);
  INFO((llama ? "llama" : "gpt-2"));
  const nn::GptSpec spec = spec_of(llama);
  nn::ParameterStore store;
  nn::Gpt gpt(spec, store);
  store.finalize(1);
  fill(store);
  const int T = spec.seq_len, V = spec.vocab;
  std::vector<std::int32_t> ids(static_cast<std::size_t>(T));
  for (int t = 0; t < T; ++t) ids[static_cast<std::size_t>(t)] = (11 * t + 5) % V;
  const IntView tokens = test::labels_to_device(ids);
  nn::StepContext eval;
  eval.training = false;
  const std::vector<float> full = test::to_host(gpt.forward(tokens, 1, eval));  // [T, V]

  std::vector<nn::KvCache> caches = gpt.make_caches();
  const int prompt = 7;
  std::vector<float> cached = test::to_host(gpt.forward_cached(tokens, prompt, 0, caches));
  for (int t = prompt; t < T; ++t) {
    const kernels::ConstLabels one(tokens.data() + t, 1);
    const std::vector<float> row = test::to_host(gpt.forward_cached(one, 1, t, caches));
    cached.insert(cached.end(), row.begin(), row.end());
  }
  REQUIRE(cached.size() == full.size());
  double worst = 0.0;
  for (std::size_t e = 0; e < full.size(); ++e)
    worst = std::max(worst, std::abs(static_cast<double>(cached[e]) - full[e]));
  INFO("worst |logit difference| " << worst);
  CHECK(worst < 2e-5);

  // Greedy decoding from a 3-token prompt: the cache's choices are the full window's.
  std::vector<std::int32_t> with_cache(ids.begin(), ids.begin() + 3), without = with_cache;
  caches = gpt.make_caches();
  std::vector<float> logits =
      test::to_host(gpt.forward_cached(test::labels_to_device(with_cache), 3, 0, caches));
  for (int t = 3; t < T; ++t) {
    const std::vector<float> last(logits.end() - V, logits.end());
    with_cache.push_back(argmax(last));
    logits = test::to_host(
        gpt.forward_cached(test::labels_to_device({with_cache.back()}), 1, t, caches));
  }
  for (int t = 3; t < T; ++t) {
    std::vector<std::int32_t> window = without;
    window.resize(static_cast<std::size_t>(T), 0);  // causal: the padding is never seen
    const std::vector<float> all =
        test::to_host(gpt.forward(test::labels_to_device(window), 1, eval));
    const std::vector<float> row(all.begin() + static_cast<std::ptrdiff_t>((t - 1) * V),
                                 all.begin() + static_cast<std::ptrdiff_t>(t * V));
    without.push_back(argmax(row));
  }
  CHECK(with_cache == without);
  // Past the context: refused by name.
  CHECK_THROWS_AS(gpt.forward_cached(tokens, 2, T - 1, caches), Error);
}
