// Activation recomputation and the blocks' shared buffers (nn/block_stack.hpp): gradients and
// losses with memory.recompute = full (groups of 1, 2 and more blocks than there are) and
// selective equal those without bit for bit (dropout on, GPT and Llama blocks), and the memory
// they take: backward scratch does not grow with depth, full recomputation keeps one
// checkpoint per group, selective shares the norms' and the GELU's outputs.
#include "catch.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/core/memory_ledger.hpp"
#include "trellis/kernels/random_fill.hpp"
#include "trellis/kernels/softmax_xent.hpp"
#include "trellis/nn/cnn.hpp"
#include "trellis/nn/gpt.hpp"
#include "trellis/nn/mlp.hpp"

#include <cstring>
#include <string>
#include <vector>

using namespace trellis;
using trellis::test::to_host;

namespace {

nn::GptSpec gpt_spec(int n_layer) {
  nn::GptSpec spec;
  spec.n_layer = n_layer;
  spec.n_head = 2;
  spec.d_model = 16;
  spec.seq_len = 6;
  spec.vocab = 13;
  spec.dropout = 0.2f;
  spec.capacity = 3;
  return spec;
}

nn::GptSpec llama_spec(int n_layer) {
  nn::GptSpec spec = gpt_spec(n_layer);
  spec.n_head = 4;
  spec.n_kv_head = 2;
  spec.d_ff = 24;
  spec.positions = nn::Positions::rope;
  spec.norm = nn::NormKind::rmsnorm;
  spec.mlp = nn::MlpKind::swiglu;
  spec.bias = false;
  spec.tied_head = false;
  spec.scaled_residual_init = false;
  spec.dropout = 0.1f;
  return spec;
}

struct Outcome {
  std::vector<double> losses;
  std::vector<float> grads;
};

// Two micro-batches (2 and 1 sequences) of one step into the same gradients.
Outcome train_step(nn::GptSpec spec, nn::RecomputeSpec recompute) {
  spec.recompute = recompute;
  nn::ParameterStore store;
  nn::Gpt gpt(spec, store);
  store.finalize(5);
  const int T = spec.seq_len, V = spec.vocab;
  std::vector<std::int32_t> tokens(3 * T), targets(3 * T);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<std::int32_t>(random_uniform(99, 1, i) * static_cast<float>(V));
    targets[i] = static_cast<std::int32_t>(random_uniform(99, 2, i) * static_cast<float>(V));
  }
  IntView tk = test::labels_to_device(tokens), tg = test::labels_to_device(targets);
  FloatView dlogits("dlogits", static_cast<std::size_t>(spec.capacity * T * V));
  Outcome out;
  for (auto [first, count] : std::vector<std::pair<int, int>>{{0, 2}, {2, 1}}) {
    const kernels::ConstLabels x(tk.data() + first * T, static_cast<std::size_t>(count * T));
    const kernels::ConstLabels y(tg.data() + first * T, static_cast<std::size_t>(count * T));
    const ConstMatrix logits = gpt.forward(x, count, nn::StepContext{7, 4, first, true});
    out.losses.push_back(kernels::softmax_xent_forward(logits, y).loss_sum);
    const Matrix dl = as_matrix(dlogits, count * T, V);
    kernels::softmax_xent_backward(logits, y, 1.0f / 18, dl);
    gpt.backward(dl, count);
  }
  out.grads = to_host(store.grads());
  return out;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::int64_t current(MemoryCategory c) {
  return process_memory_ledger().snapshot().current[static_cast<std::size_t>(c)];
}

}  // namespace

TEST_CASE("recomputed blocks give bitwise the gradients of stored activations",
          "[recompute][gpt]") {
  for (const bool llama : {false, true}) {
    const nn::GptSpec spec = llama ? llama_spec(3) : gpt_spec(3);
    const Outcome stored = train_step(spec, {});
    double largest = 0;
    for (float g : stored.grads) largest = std::max(largest, static_cast<double>(std::fabs(g)));
    REQUIRE(largest > 1e-3);
    for (const int every : {1, 2, 3, 5}) {
      INFO((llama ? "llama" : "gpt") << ", memory.recompute_every = " << every);
      const Outcome recomputed = train_step(spec, {nn::Recompute::full, every});
      CHECK(recomputed.losses == stored.losses);
      CHECK(bitwise_equal(recomputed.grads, stored.grads));
    }
    INFO((llama ? "llama" : "gpt") << ", memory.recompute = selective");
    const Outcome selective = train_step(spec, {nn::Recompute::selective, 1});
    CHECK(selective.losses == stored.losses);
    CHECK(bitwise_equal(selective.grads, stored.grads));
  }
}

TEST_CASE("backward scratch is shared by the blocks and recomputation keeps checkpoints only",
          "[recompute][memory]") {
  const MemoryTracking tracking;
  struct Bytes {
    std::int64_t activations, workspace, recompute;
  };
  auto built = [](nn::GptSpec spec, nn::RecomputeSpec recompute) {
    spec.recompute = recompute;
    const Bytes before{current(MemoryCategory::activations), current(MemoryCategory::workspace),
                       current(MemoryCategory::recompute)};
    nn::ParameterStore store;
    nn::Gpt gpt(spec, store);
    return Bytes{current(MemoryCategory::activations) - before.activations,
                 current(MemoryCategory::workspace) - before.workspace,
                 current(MemoryCategory::recompute) - before.recompute};
  };
  const Bytes shallow = built(gpt_spec(2), {}), deep = built(gpt_spec(8), {});
  // Scratch: two blocks' worth whatever the depth (the head's and embeddings' own aside).
  CHECK(deep.workspace == shallow.workspace);
  const std::int64_t per_block = (deep.activations - shallow.activations) / 6;
  CHECK(per_block > 0);
  CHECK(shallow.recompute == 0);
  // Full recomputation: per block only its checkpoint (rows x d floats) stays; one block's
  // activations are shared.
  const Bytes full = built(gpt_spec(8), {nn::Recompute::full, 1});
  const std::int64_t checkpoint = 3 * 6 * 16 * 4;
  CHECK(full.activations == deep.activations - 8 * per_block + 8 * checkpoint);
  CHECK(full.recompute >= per_block);
  CHECK(full.recompute < 2 * per_block);
  CHECK(full.workspace == deep.workspace);
  // Selective: each block's norm outputs and GELU output (2 d + 4 d floats per row) are shared
  // by all blocks; the rest stays.
  const Bytes selective = built(gpt_spec(8), {nn::Recompute::selective, 1});
  const std::int64_t cheap = 3 * 6 * (2 * 16 + 4 * 16) * 4;
  CHECK(selective.recompute == cheap);
  // (plus each c_fc's [4 d] vector of -0.0 the recomputed epilogue adds: Linear)
  CHECK(selective.activations == deep.activations - 8 * cheap + 8 * 4 * 16 * 4);
  CHECK(selective.workspace == deep.workspace);
  // Groups of 4: two checkpoints, four blocks' activations shared.
  const Bytes grouped = built(gpt_spec(8), {nn::Recompute::full, 4});
  CHECK(grouped.activations == deep.activations - 8 * per_block + 2 * checkpoint);
  CHECK(grouped.recompute == 4 * full.recompute);
}

TEST_CASE("recomputed residual blocks give bitwise the gradients and running statistics",
          "[recompute][cnn]") {
  nn::CnnSpec spec;
  spec.channels = 2;
  spec.height = 8;
  spec.width = 8;
  spec.classes = 3;
  spec.widths = {3, 4, 5};
  spec.blocks_per_stage = 2;
  spec.capacity = 4;
  const int n = 4, in = 2 * 64;
  std::vector<float> x(static_cast<std::size_t>(n * in)), w(static_cast<std::size_t>(n * 3));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = 4 * random_uniform(5, 1, i) - 2;
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = random_uniform(5, 2, i) - 0.5f;
  const FloatView xs = test::to_device("x", x), dy = test::to_device("dy", w);
  struct Result {
    std::vector<float> logits, grads, running;
  };
  auto train = [&](nn::RecomputeSpec recompute) {
    spec.recompute = recompute;
    nn::ParameterStore store;
    nn::Cnn model(spec, store);
    store.finalize(23);
    Result r;
    for (int step = 0; step < 2; ++step) {  // two steps: the running statistics move twice
      r.logits = to_host(model.forward(as_matrix(xs, n, in), n, nn::StepContext{}));
      model.backward(as_matrix(dy, n, 3), n);
    }
    r.grads = to_host(store.grads());
    for (const nn::NamedBuffer& b : model.buffers()) {
      const std::vector<float> values = to_host(b.data);
      r.running.insert(r.running.end(), values.begin(), values.end());
    }
    return r;
  };
  const Result stored = train({});
  REQUIRE(!stored.running.empty());
  for (const int every : {1, 2, 4}) {
    INFO("memory.recompute = full, every " << every);
    const Result recomputed = train({nn::Recompute::full, every});
    CHECK(bitwise_equal(recomputed.logits, stored.logits));
    CHECK(bitwise_equal(recomputed.grads, stored.grads));
    CHECK(bitwise_equal(recomputed.running, stored.running));
  }
}

TEST_CASE("recomputed MLP layers give bitwise the gradients, with dropout", "[recompute][mlp]") {
  const MemoryTracking tracking;
  nn::MlpSpec spec;
  spec.input_dim = 7;
  spec.hidden = {9, 8, 6, 5};
  spec.classes = 3;
  spec.activation = "gelu";
  spec.dropout = 0.3f;
  spec.capacity = 4;
  spec.input_grad = true;
  const int n = 4;
  std::vector<float> x(static_cast<std::size_t>(n * 7)), w(static_cast<std::size_t>(n * 3));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = 4 * random_uniform(6, 1, i) - 2;
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = random_uniform(6, 2, i) - 0.5f;
  const FloatView xs = test::to_device("x", x), dy = test::to_device("dy", w);
  struct Result {
    std::vector<float> logits, grads, dx;
    std::int64_t activations = 0, recompute = 0;
  };
  auto train = [&](nn::RecomputeSpec recompute) {
    spec.recompute = recompute;
    const MemorySnapshot before = process_memory_ledger().snapshot();
    nn::ParameterStore store;
    nn::Mlp model(spec, store);
    store.finalize(29);
    const MemorySnapshot built = process_memory_ledger().snapshot();
    Result r;
    r.activations = built.current[static_cast<int>(MemoryCategory::activations)] -
                    before.current[static_cast<int>(MemoryCategory::activations)];
    r.recompute = built.current[static_cast<int>(MemoryCategory::recompute)] -
                  before.current[static_cast<int>(MemoryCategory::recompute)];
    nn::StepContext ctx;
    ctx.seed = 3;
    for (int step = 0; step < 2; ++step) {  // two steps: fresh dropout masks, summed gradients
      ctx.step = step;
      r.logits = to_host(model.forward(as_matrix(xs, n, 7), n, ctx));
      model.backward(as_matrix(dy, n, 3), n);
    }
    r.grads = to_host(store.grads());
    r.dx = to_host(model.input_grad());
    return r;
  };
  const Result stored = train({});
  CHECK(stored.recompute == 0);
  for (const int every : {1, 2, 5}) {
    INFO("memory.recompute = full, every " << every);
    const Result recomputed = train({nn::Recompute::full, every});
    CHECK(bitwise_equal(recomputed.logits, stored.logits));
    CHECK(bitwise_equal(recomputed.grads, stored.grads));
    CHECK(bitwise_equal(recomputed.dx, stored.dx));
    // What the layers keep moves into the shared recompute pools and the groups' checkpoints.
    CHECK(recomputed.activations < stored.activations);
    CHECK(recomputed.recompute > 0);
  }
}
