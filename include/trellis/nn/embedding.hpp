// Token and position embeddings of a language model (kernels/embedding.hpp).
//
// Embedding: token ids -> vectors. Not an nn::Layer, because its input is int32 ids, not a
// float matrix, and it has no input gradient.
//   tokens [n] int32 in [0, vocab)    W "<name>.weight" [vocab, d] ~ N(0, 0.02^2), no decay
//   y [n, d]
// forward:   y[r, :] = W[tokens[r], :]; an id outside [0, vocab) throws trellis::InputError
//            naming the id and its position (row of this call)
// backward:  dW[v, :] += sum over rows r with tokens[r] == v of dy[r, :]      (+=)
//            deterministic without atomics or sort: one thread per column j adds the rows in
//            increasing order, so the sum is bitwise reproducible on any backend.
//
// Vocabulary parallelism (tp, Megatron's VocabParallelEmbedding): each tp rank holds rows
// [r * vocab/tp, (r + 1) * vocab/tp) of W; forward looks up the ids it holds, writes 0 for the
// others and all-reduces the rows over tp; backward adds only into its own rows (dy is the
// same on every tp rank). vocab must be divisible by tp.
//
// PositionalEmbedding: learned absolute positions added to the rows, an nn::Layer.
//   x [n, d] (rows = whole sequences of seq_len tokens back to back, n % seq_len == 0)
//   P "<name>.weight" [seq_len, d] ~ N(0, 0.02^2), no decay
//   y [n, d]
// forward:   y[r, :] = x[r, :] + P[r % seq_len, :]
// backward:  dx = dy (=);  dP[t, :] += sum over rows r with r % seq_len == t of dy[r, :] (+=),
//            rows in increasing order (deterministic)
//
// Weight decay: GPT-2 practice as in minGPT / the brief: no decay for embeddings, LayerNorm
// and biases; decay for Linear weights only.
#pragma once

#include "trellis/core/kokkos_types.hpp"
#include "trellis/kernels/views.hpp"
#include "trellis/nn/init.hpp"
#include "trellis/nn/layer.hpp"
#include "trellis/nn/parameter_store.hpp"
#include "trellis/nn/tensor_parallel.hpp"

#include <cstddef>
#include <string>

namespace trellis::nn {

class Embedding {
 public:
  // Registers "<name>.weight" [vocab, dim]; capacity = most rows (tokens) per call.
  Embedding(ParameterStore& store, const std::string& name, int vocab, int dim, int capacity,
            const InitSpec& init = InitSpec::normal(0.02), TensorParallel tp = {});
  Embedding(const Embedding&) = delete;
  Embedding& operator=(const Embedding&) = delete;

  // tokens: [>= n]; must stay unchanged until backward. Writes output() rows [0, n).
  void forward(kernels::ConstLabels tokens, int n, const StepContext& ctx);
  // output_grad: [>= n, dim], n as in the last forward. Adds into the weight gradient.
  void backward(ConstMatrix output_grad, int n);

  ConstMatrix output() const;  // [capacity, dim]
  const std::string& name() const { return name_; }
  int vocab() const { return vocab_; }  // logical
  int local_vocab() const { return vocab_ / tp_.size(); }
  int vocab_offset() const { return tp_.rank() * local_vocab(); }
  int dim() const { return dim_; }
  int capacity() const { return capacity_; }
  std::size_t weight_index() const { return weight_; }

 private:
  ParameterStore* store_;
  std::string name_;
  int vocab_, dim_, capacity_;
  TensorParallel tp_;
  std::size_t weight_;
  FloatView output_;             // [capacity * dim]
  kernels::ConstLabels tokens_;  // [n] window onto the last forward's ids
  bool has_forward_ = false;
};

class PositionalEmbedding : public Layer {
 public:
  // Registers "<name>.weight" [seq_len, dim]; capacity in rows.
  PositionalEmbedding(ParameterStore& store, const std::string& name, int seq_len, int dim,
                      int capacity, const InitSpec& init = InitSpec::normal(0.02));

  void forward(ConstMatrix input, int n, const StepContext& ctx) override;
  void backward(ConstMatrix output_grad, int n) override;
  // Generation: n consecutive tokens of one sequence at positions [first_position,
  // first_position + n) (<= seq_len), whatever n is.
  void forward_at(ConstMatrix input, int n, int first_position);

  int seq_len() const { return seq_len_; }
  std::size_t weight_index() const { return weight_; }

 private:
  ParameterStore* store_;
  int seq_len_;
  std::size_t weight_;
};

}  // namespace trellis::nn
