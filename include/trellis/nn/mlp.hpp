// Mlp: a multi-layer perceptron classifier.
//
//   input [n, input_dim]
//   -> fc1 (Linear) -> act1 (relu|gelu) [-> drop1 (Dropout)]   for each hidden width h_i
//   -> ...
//   -> head (Linear) -> logits [n, classes]
// Parameters (registered in the ParameterStore passed in, optional name prefix):
//   fc<i>.weight [h_i, h_{i-1}], fc<i>.bias [h_i], ..., head.weight [classes, h_last], head.bias.
// Gradient rule as for every layer: parameter grads +=, input grad =.
// Dropout masks are streamed by layer name ("drop<i>") and step, indexed by ctx.first_sample.
//
// Tensor parallelism (spec.tp, nn/tensor_parallel.hpp): hidden layers pair up as column- then
// row-parallel Linears (fc1 column, fc2 row, fc3 column, ...); activations and dropout between
// them work on this rank's columns. The head is row-parallel after an unpaired column layer,
// and replicated otherwise (classifier heads are small; logits are always whole). Every
// hidden width must be divisible by parallel.tp.
//
// Each hidden layer (fc<i> with its activation, and drop<i>) is one MlpLayer (mlp_layer.hpp),
// a block of a BlockStack: a unit of ZeRO-2/3 (gathered and reduce-scattered layer by layer)
// and, with spec.recompute full, recomputed in groups of recompute.every layers. The head is
// outside the stack (an outer tensor of ZeRO-3).
#pragma once

#include "trellis/nn/block_stack.hpp"
#include "trellis/nn/layer.hpp"
#include "trellis/nn/layer_sequence.hpp"
#include "trellis/nn/linear.hpp"
#include "trellis/nn/model.hpp"
#include "trellis/nn/parameter_store.hpp"
#include "trellis/nn/tensor_parallel.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace trellis::nn {

struct MlpSpec {
  int input_dim = 0;
  std::vector<int> hidden;  // widths of the hidden layers (may be empty)
  int classes = 0;
  std::string activation = "relu";  // "relu" | "gelu"
  float dropout = 0.0f;             // after each hidden activation; 0 = no dropout layers
  std::string init = "kaiming";     // "kaiming" (PyTorch Linear default) | "xavier"
  int capacity = 0;                 // max rows per forward/backward call
  TensorParallel tp;                // none by default
  StageRange stage;                 // units: fc<i> (+ act, drop) for each hidden layer, head
  // Full recomputation of the hidden layers (block_stack.hpp; selective has nothing cheap to
  // drop here: the activation is fused into the GEMM and the output is the next one's input).
  RecomputeSpec recompute;
  // Whether the first stage computes d loss / d input too (tests; other stages always do, as
  // the pipeline sends it). Off, the first Linear leaves out its dx GEMM.
  bool input_grad = false;
};

class Mlp : public Model {
 public:
  // Validates the spec (ConfigError on bad values) and registers all parameters in `store`,
  // which must be finalized before the first forward and outlive the Mlp.
  Mlp(const MlpSpec& spec, ParameterStore& store, const std::string& prefix = "");

  // input: [>= n, input_dim]; must stay unchanged until backward. Returns logits [n, classes],
  // a window onto the head's output buffer (valid until the next forward).
  ConstMatrix forward(ConstMatrix input, int n, const StepContext& ctx);
  ConstMatrix forward(const ModelInput& input, int n, const StepContext& ctx) override {
    return forward(first_stage() ? input.features : input.activations, n, ctx);
  }
  // dlogits: [>= n, classes]. Adds parameter gradients; writes input_grad() rows [0, n).
  void backward(ConstMatrix dlogits, int n) override;
  int classes() const override { return spec_.classes; }
  bool first_stage() const override { return first_unit_ == 0; }
  bool last_stage() const override { return end_unit_ == num_units(spec_); }
  int stage_input_width() const override { return first_stage() ? 0 : layers_[0].in_features(); }
  int stage_output_width() const override { return layers_[layers_.size() - 1].out_features(); }
  ConstMatrix stage_input_grad() const override {
    return first_stage() ? ConstMatrix() : input_grad();
  }
  static int num_units(const MlpSpec& spec) { return static_cast<int>(spec.hidden.size()) + 1; }
  int capacity() const override { return spec_.capacity; }
  std::string describe() const override;
  // This stage's hidden layers: fc<i>'s output neurons (bias with them), read by the next
  // layer's columns.
  std::vector<PrunableUnits> prunable_units() const override;
  void for_each_layer(const std::function<void(Layer&)>& f) override {
    for (std::size_t i = 0; i < layers_.size(); ++i) visit_layers(layers_[i], f);
  }

  // [capacity, input_dim]. Throws trellis::Error on a first stage built without
  // spec.input_grad (nothing computes it there).
  ConstMatrix input_grad() const;
  // Forward + backward FLOPs per sample of the Linear layers: sum of 6 * in * out.
  std::int64_t flops_per_sample() const override;

  const MlpSpec& spec() const { return spec_; }
  std::size_t num_layers() const { return layers_.size(); }
  const Layer& layer(std::size_t i) const { return layers_[i]; }
  Layer& layer(std::size_t i) { return layers_[i]; }

 private:
  void no_input_grad_if_data(Linear& fc) const;

  MlpSpec spec_;
  std::string prefix_;
  int first_unit_ = 0, end_unit_ = 0;  // the units this model (stage) holds
  // This stage's hidden layers (MlpLayer: ZeRO-2/3 units, recomputed groups), then the head.
  LayerSequence layers_;
  std::unique_ptr<BlockStack> stack_;  // the hidden layers, layers_[0, stack_->size())
};

// Throws ConfigError naming the first bad field.
void validate(const MlpSpec& spec);

// Relative cost of each unit (FLOPs per sample of its Linear), for balancing pipeline stages.
std::vector<double> mlp_unit_costs(const MlpSpec& spec);

}  // namespace trellis::nn
