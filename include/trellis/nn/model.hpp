// Model: a whole network from its input to its logits, the unit the trainer drives.
//
// Two kinds of input share one interface:
//   classifiers (mlp, cnn):   features [n, feature_dim] float   -> logits [n, classes]
//   language models (gpt):    tokens   [n * seq_len]     int32  -> logits [n * seq_len, vocab]
// so that the loss is always a softmax cross-entropy over n * rows_per_sample() rows of
// classes() logits, with targets [n * rows_per_sample()] (labels, or next tokens).
//
// n counts samples (images, sequences); every buffer is sized at construction for
// capacity() samples, and forward/backward take n <= capacity(). Gradient rule as for layers:
// backward adds (+=) into the ParameterStore's gradients.
#pragma once

#include "trellis/core/kokkos_types.hpp"
#include "trellis/kernels/views.hpp"
#include "trellis/nn/layer.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace trellis::nn {

// A named non-trainable buffer (BatchNorm running statistics): saved with the weights and
// restored by name, like parameters, but never touched by the optimizer.
struct NamedBuffer {
  std::string name;      // "stem.bn.running_mean", "stage1.block1.bn1.running_var", ...
  kernels::Vector data;  // [size], writable to restore
};

// Output units that structured pruning removes together (prune.method = structured): row u
// (dim 0) of `weight`, entry u of each follower parameter (the bias, a BatchNorm's gamma and
// beta) and, when a smaller model is exported, entry u of each follower buffer (BatchNorm
// running statistics) and column u (dim 1) of `consumer`, the next layer's weight, which
// reads the unit. Zero weights and followers make the unit's output exactly zero (Linear:
// act(0) = 0 for relu and gelu; Conv + BatchNorm: gamma = beta = 0), so removing it changes
// nothing downstream.
struct PrunableUnits {
  std::string weight;                         // [units, ...]
  std::vector<std::string> followers;         // each [units]
  std::vector<std::string> follower_buffers;  // each [units]
  std::string consumer;                       // [out, units, ...]; "" on another stage
};

struct ModelInput {
  ConstMatrix features;         // [>= n, feature_dim] for classifiers; empty otherwise
  kernels::ConstLabels tokens;  // [>= n * seq_len] token ids for language models; empty otherwise
  // Pipeline stages after the first: the previous stage's output,
  // [>= n * rows_per_sample(), stage_input_width()].
  ConstMatrix activations;
};

// Pipeline parallelism: a model is a chain of units (MLP: a Linear with its activation and
// dropout; GPT: the embeddings, each block, the final LayerNorm with the head). A model built
// for units [first_unit, end_unit) holds only their parameters and buffers: a stage.
struct StageRange {
  int first_unit = 0;
  int end_unit = -1;  // -1: to the last unit
};

class Model {
 public:
  virtual ~Model() = default;

  // Returns logits [n * rows_per_sample(), local_classes()], valid until the next forward. The
  // input must stay unchanged until the matching backward().
  virtual ConstMatrix forward(const ModelInput& input, int n, const StepContext& ctx) = 0;
  // dlogits: [n * rows_per_sample(), local_classes()], n as in the last forward.
  virtual void backward(ConstMatrix dlogits, int n) = 0;

  virtual int classes() const = 0;  // logits per row: classes or vocabulary
  // Vocabulary-parallel models (tp) return only columns [class_offset(), + local_classes())
  // of the logits on each rank; the loss then reduces over the tp group.
  virtual int local_classes() const { return classes(); }
  virtual int class_offset() const { return 0; }
  virtual int rows_per_sample() const { return 1; }  // seq_len for language models
  virtual int capacity() const = 0;                  // most samples per call
  virtual bool takes_tokens() const { return false; }
  // Forward + backward FLOPs per sample (matmul-dominated terms), for throughput and MFU.
  virtual std::int64_t flops_per_sample() const = 0;
  virtual std::string describe() const = 0;  // "mlp 784-256-128-10"
  virtual std::vector<NamedBuffer> buffers() const { return {}; }

  // Pipeline stages (see StageRange). A non-first stage reads ModelInput::activations; a
  // non-last stage returns activations [n * rows_per_sample(), stage_output_width()] instead
  // of logits, and its backward takes their gradient. After backward, stage_input_grad() is
  // the gradient of this stage's input activations, to send to the previous stage.
  virtual bool first_stage() const { return true; }
  virtual bool last_stage() const { return true; }
  virtual int stage_input_width() const { return 0; }  // 0 on the first stage
  virtual int stage_output_width() const { return local_classes(); }
  virtual ConstMatrix stage_input_grad() const { return {}; }  // [capacity rows, input width]
  // Parameters held by both the first and the last stage (the GPT's token table: embedding
  // on the first, tied output head on the last), when they are different stages: their
  // gradients are summed over the two before the update, so both copies stay equal. The
  // last stage's copy is not counted in the gradient norm nor saved.
  virtual std::vector<std::string> tied_parameters() const { return {}; }
  // Calls f on every layer of this stage, composite layers' parts included (visit_layers),
  // in forward order.
  virtual void for_each_layer(const std::function<void(Layer&)>& f) = 0;
  // (convolution, BatchNorm) layer names where the BatchNorm normalises exactly that
  // convolution's output, so int8 inference can fold it into the convolution.
  virtual std::vector<std::pair<std::string, std::string>> conv_batchnorm_pairs() const {
    return {};
  }
  // The unit groups of this stage that structured pruning may remove (none by default).
  virtual std::vector<PrunableUnits> prunable_units() const { return {}; }
};

}  // namespace trellis::nn
