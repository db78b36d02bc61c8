// Pruner (train/loop/pruner.hpp): when due, the k = round(s x n) smallest magnitudes (per weight,
// or over all weights) or the weakest units are pruned; pruned weights, their gradients and
// their optimizer state are zero and stay zero through training steps; biases are never pruned.
#include "catch.hpp"
#include "unit/support/train_helpers.hpp"

#include "trellis/train/input/batch_buffers.hpp"
#include "trellis/train/loop/step_runner.hpp"

#include <map>
#include <string>
#include <vector>

using namespace trellis;
using namespace trellis::test;

namespace {

// Element e of a weight of n elements has magnitude (((e * stride) % n) + 1) / 8 + offset, signs
// alternating: the k smallest are those with (e * stride) % n < k, not the first k.
std::vector<float> ranked(std::size_t n, std::size_t stride, float offset) {
  std::vector<float> v(n);
  for (std::size_t e = 0; e < n; ++e)
    v[e] = (e % 2 ? -1.0f : 1.0f) * (0.125f * static_cast<float>((e * stride) % n + 1) + offset);
  return v;
}

// `before` with the elements whose rank (e * stride) % n is below k set to zero.
std::vector<float> pruned(std::vector<float> before, std::size_t stride, std::size_t k) {
  for (std::size_t e = 0; e < before.size(); ++e)
    if ((e * stride) % before.size() < k) before[e] = 0.0f;
  return before;
}

std::vector<float> where_zero(const std::vector<float>& mask_of, float kept, float zero) {
  std::vector<float> out(mask_of.size());
  for (std::size_t e = 0; e < out.size(); ++e) out[e] = mask_of[e] == 0.0f ? zero : kept;
  return out;
}

std::map<std::string, std::string> one_shot(const std::string& method, const std::string& scope,
                                            int at_step) {
  const std::string step = std::to_string(at_step);
  return {{"prune.method", method},   {"prune.scope", scope},   {"prune.final_sparsity", "0.5"},
          {"prune.start_step", step}, {"prune.end_step", step}, {"prune.frequency", "1"}};
}

void fill_state(TinyRun& run, float value) {
  for (const auto& [name, view] : run.model->optimizer().state()) Kokkos::deep_copy(view, value);
}

}  // namespace

TEST_CASE("magnitude pruning per layer zeroes each weight's k smallest, state included",
          "[pruner]") {
  TinyRun run(one_shot("magnitude", "layer", 2));
  const std::vector<float> fc1 = ranked(32, 5, 0.0f), head = ranked(24, 7, 0.0f);
  run.set_param("fc1.weight", fc1);
  run.set_param("head.weight", head);
  run.set_param("fc1.bias", std::vector<float>(8, 0.001f));  // the smallest, never pruned
  run.set_param("head.bias", std::vector<float>(3, 0.001f));
  fill_state(run, 1.0f);
  CHECK(run.pruner->enabled());
  CHECK(run.pruner->checkpoint_kind() == 1);

  CHECK_FALSE(run.pruner->after_step(1));  // not due before start_step
  CHECK(run.param("fc1.weight") == fc1);
  CHECK(run.pruner->after_step(2));
  const std::vector<float> fc1_after = pruned(fc1, 5, 16), head_after = pruned(head, 7, 12);
  CHECK(run.param("fc1.weight") == fc1_after);    // round(0.5 x 32) = 16
  CHECK(run.param("head.weight") == head_after);  // round(0.5 x 24) = 12
  CHECK(run.param("fc1.bias") == std::vector<float>(8, 0.001f));
  CHECK(run.param("head.bias") == std::vector<float>(3, 0.001f));
  for (const char* state : {"exp_avg", "exp_avg_sq"}) {
    INFO(state);
    CHECK(run.state(state, "fc1.weight") == where_zero(fc1_after, 1.0f, 0.0f));
    CHECK(run.state(state, "head.weight") == where_zero(head_after, 1.0f, 0.0f));
    CHECK(run.state(state, "fc1.bias") == std::vector<float>(8, 1.0f));
  }
  const std::vector<LayerSparsity> layers = run.pruner->sparsity();
  REQUIRE(layers.size() == 2);
  CHECK(layers[0].name == "fc1.weight");
  CHECK(layers[0].pruned == 16);
  CHECK(layers[0].elements == 32);
  CHECK(layers[1].name == "head.weight");
  CHECK(layers[1].pruned == 12);
  CHECK(layers[1].elements == 24);
  CHECK_FALSE(run.pruner->after_step(3));  // past the end: the masks stay as they are

  // The masks keep applying: to the gradients and to the weights after an update.
  GradientSync& sync = run.model->sync();
  Kokkos::deep_copy(sync.update_grads(), 2.0f);
  run.pruner->mask_gradients(sync.update_grads());
  Kokkos::deep_copy(run.model->store().params(), 3.0f);
  run.pruner->mask_updated_params(sync.update_windows());
  const nn::ParamInfo& info = run.model->store().info(run.model->store().index("fc1.weight"));
  CHECK(to_host(slice(sync.update_grads(), info.offset, info.offset + info.numel)) ==
        where_zero(fc1_after, 2.0f, 0.0f));
  CHECK(run.param("fc1.weight") == where_zero(fc1_after, 3.0f, 0.0f));
  CHECK(run.param("fc1.bias") == std::vector<float>(8, 3.0f));

  std::vector<std::string> names;
  for (const TensorPiece& piece : run.pruner->mask_pieces()) names.push_back(piece.name);
  CHECK(names == std::vector<std::string>{"masks/fc1.weight", "masks/head.weight"});
}

TEST_CASE("magnitude pruning with scope global uses one threshold over all weights", "[pruner]") {
  TinyRun run(one_shot("magnitude", "global", 1));
  const std::vector<float> fc1 = ranked(32, 5, 0.0f), head = ranked(24, 7, 100.0f);
  run.set_param("fc1.weight", fc1);
  run.set_param("head.weight", head);
  CHECK(run.pruner->after_step(1));
  // round(0.5 x 56) = 28 smallest of both: all in fc1, whose magnitudes are all smaller.
  CHECK(run.param("fc1.weight") == pruned(fc1, 5, 28));
  CHECK(run.param("head.weight") == head);
  const std::vector<LayerSparsity> layers = run.pruner->sparsity();
  REQUIRE(layers.size() == 2);
  CHECK(layers[0].pruned == 28);
  CHECK(layers[1].pruned == 0);
}

TEST_CASE("structured pruning removes the weakest hidden units with their biases", "[pruner]") {
  TinyRun run(one_shot("structured", "layer", 1));
  CHECK(run.pruner->checkpoint_kind() == 2);
  // Row r of fc1.weight [8, 4] has norm 2 x (((3 r) % 8) + 1) / 8: rows with (3 r) % 8 < 4 go.
  std::vector<float> fc1(32), bias(8), expected_fc1(32), expected_bias(8);
  for (std::size_t r = 0; r < 8; ++r) {
    const float value = 0.125f * static_cast<float>((3 * r) % 8 + 1);
    const bool kept = (3 * r) % 8 >= 4;
    bias[r] = 5.0f, expected_bias[r] = kept ? 5.0f : 0.0f;
    for (std::size_t c = 0; c < 4; ++c) {
      fc1[r * 4 + c] = value;
      expected_fc1[r * 4 + c] = kept ? value : 0.0f;
    }
  }
  run.set_param("fc1.weight", fc1);
  run.set_param("fc1.bias", bias);
  const std::vector<float> head = run.param("head.weight");
  CHECK(run.pruner->after_step(1));
  CHECK(run.param("fc1.weight") == expected_fc1);
  CHECK(run.param("fc1.bias") == expected_bias);
  CHECK(run.param("head.weight") == head);  // the output layer has no units to prune
  const std::vector<LayerSparsity> layers = run.pruner->sparsity();
  REQUIRE(layers.size() == 1);
  CHECK(layers[0].name == "fc1.weight");
  CHECK(layers[0].pruned == 16);
}

TEST_CASE("through training steps pruned weights, gradients and optimizer state stay zero",
          "[pruner]") {
  // AdamW with weight decay: every update rule must leave zero weights with zero state at zero.
  std::map<std::string, std::string> keys = one_shot("magnitude", "layer", 1);
  keys["optim.type"] = "adamw";
  keys["optim.weight_decay"] = "0.1";
  TinyRun run(keys);
  FixedSource data(*run.grid);
  BatchBuffers buffers(4, 4, 0);
  StepRunner runner(run.config, *run.grid, *run.model, data, buffers, *run.faults, *run.pruner,
                    run.log);
  CHECK(runner.run(0, 0).masks_changed);
  const std::vector<float> fc1_masked = run.param("fc1.weight");
  const std::vector<float> head_masked = run.param("head.weight");
  std::vector<float> fc1_mask = where_zero(fc1_masked, 1.0f, 0.0f);
  std::size_t zeros = 0;
  for (float m : fc1_mask) zeros += m == 0.0f ? 1 : 0;
  CHECK(zeros == 16);
  for (std::int64_t s = 1; s < 4; ++s) {
    const StepRecord record = runner.run(0, s);
    CHECK_FALSE(record.skipped);
    CHECK_FALSE(record.masks_changed);
  }
  const std::vector<float> fc1 = run.param("fc1.weight");
  CHECK(where_zero(fc1, 1.0f, 0.0f) == fc1_mask);  // the same zeros, and only those
  CHECK(fc1 != fc1_masked);                        // the kept weights trained
  CHECK(where_zero(run.param("head.weight"), 1.0f, 0.0f) == where_zero(head_masked, 1.0f, 0.0f));
  const nn::ParamInfo& info = run.model->store().info(run.model->store().index("fc1.weight"));
  const std::vector<float> grads =
      to_host(slice(run.model->sync().update_grads(), info.offset, info.offset + info.numel));
  for (const char* state : {"exp_avg", "exp_avg_sq"}) {
    const std::vector<float> values = run.state(state, "fc1.weight");
    for (std::size_t e = 0; e < values.size(); ++e)
      if (fc1_mask[e] == 0.0f) {
        INFO(state << " element " << e);
        CHECK(values[e] == 0.0f);
        CHECK(grads[e] == 0.0f);
      }
  }
}
