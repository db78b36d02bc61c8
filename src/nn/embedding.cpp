#include "trellis/nn/embedding.hpp"

#include "trellis/core/error.hpp"
#include "trellis/kernels/embedding.hpp"
#include "trellis/kernels/vector_ops.hpp"
#include "trellis/nn/buffer_pool.hpp"

#include <string>

namespace trellis::nn {

Embedding::Embedding(ParameterStore& store, const std::string& name, int vocab, int dim,
                     int capacity, const InitSpec& init, TensorParallel tp)
    : store_(&store), name_(name), vocab_(vocab), dim_(dim), capacity_(capacity), tp_(tp) {
  if (vocab <= 0 || dim <= 0 || capacity <= 0) {
    throw Error("embedding \"" + name + "\": vocab (" + std::to_string(vocab) + "), dim (" +
                std::to_string(dim) + ") and capacity (" + std::to_string(capacity) +
                ") must be positive");
  }
  if (tp.active() && vocab % tp.size() != 0)
    throw ConfigError("embedding \"" + name + "\": vocabulary " + std::to_string(vocab) +
                      " is not divisible by parallel.tp = " + std::to_string(tp.size()) +
                      " (set model.vocab to a multiple)");
  weight_ = tp.active() ? store.add(name + ".weight", {vocab, dim}, init, false,
                                    ShardSpec::split(0, tp.size(), tp.rank()))
                        : store.add(name + ".weight", {vocab, dim}, init, false);
  output_ = layer_buffer(BufferRole::saved, "trellis::nn::" + name + ".output",
                         static_cast<std::size_t>(capacity) * static_cast<std::size_t>(dim));
}

void Embedding::forward(kernels::ConstLabels tokens, int n, const StepContext&) {
  const ConstMatrix w = store_->param_matrix(weight_);
  if (n < 0 || n > capacity_ || tokens.extent(0) < static_cast<std::size_t>(n)) {
    throw Error("embedding \"" + name_ + "\": forward of " + std::to_string(n) + " rows with " +
                std::to_string(tokens.extent(0)) + " token ids, capacity " +
                std::to_string(capacity_));
  }
  tokens_ = kernels::ConstLabels(tokens.data(), static_cast<std::size_t>(n));
  has_forward_ = true;
  const Matrix out = as_matrix(output_, n, dim_);
  kernels::embedding_forward(tokens_, w, out, name_, vocab_offset(), vocab_);
  if (tp_.active()) tp_.comm->all_reduce(out.data(), out.size(), ReduceOp::sum);
}

void Embedding::backward(ConstMatrix output_grad, int n) {
  if (!has_forward_ || static_cast<std::size_t>(n) != tokens_.extent(0) ||
      output_grad.extent(1) != static_cast<std::size_t>(dim_) ||
      output_grad.extent(0) < static_cast<std::size_t>(n)) {
    throw Error("embedding \"" + name_ + "\": backward of " + std::to_string(n) + " rows, " +
                kernels::extents_string(output_grad) + " gradient, does not follow a forward " +
                "of the same rows");
  }
  kernels::embedding_backward(tokens_, kernels::first_rows(output_grad, n),
                              store_->grad_matrix(weight_), vocab_offset());
}

ConstMatrix Embedding::output() const { return as_matrix(output_, capacity_, dim_); }

PositionalEmbedding::PositionalEmbedding(ParameterStore& store, const std::string& name,
                                         int seq_len, int dim, int capacity, const InitSpec& init)
    : Layer(name, dim, dim, capacity), store_(&store), seq_len_(seq_len) {
  if (seq_len <= 0) {
    throw Error("positional embedding \"" + name + "\": seq_len must be positive, got " +
                std::to_string(seq_len));
  }
  weight_ = store.add(name + ".weight", {seq_len, dim}, init, false);
}

void PositionalEmbedding::forward(ConstMatrix input, int n, const StepContext&) {
  const ConstMatrix pos = store_->param_matrix(weight_);  // [T, d]
  const ConstMatrix x = begin_forward(input, n);
  TRELLIS_REQUIRE(n % seq_len_ == 0,
                  "positional embedding \"" + name() + "\": " + std::to_string(n) +
                      " rows are no whole sequences of " + std::to_string(seq_len_));
  kernels::position_add(x, pos, output_rows(n));
}

void PositionalEmbedding::forward_at(ConstMatrix input, int n, int first_position) {
  const ConstMatrix pos = store_->param_matrix(weight_);  // [T, d]
  const ConstMatrix x = begin_forward(input, n);
  TRELLIS_REQUIRE(first_position >= 0 && first_position + n <= seq_len_,
                  "positional embedding \"" + name() + "\": positions [" +
                      std::to_string(first_position) + ", " + std::to_string(first_position + n) +
                      ") outside the table's " + std::to_string(seq_len_));
  // Rows [first_position, first_position + n) of the table as an n-row table: row r gets
  // position first_position + r.
  const ConstMatrix window(pos.data() + static_cast<std::size_t>(first_position) * pos.extent(1),
                           static_cast<std::size_t>(n), pos.extent(1));
  kernels::position_add(x, window, output_rows(n));
}

void PositionalEmbedding::backward(ConstMatrix output_grad, int n) {
  const ConstMatrix dy = begin_backward(output_grad, n);
  kernels::position_backward(dy, store_->grad_matrix(weight_));
  kernels::copy(kernels::flat(dy), kernels::flat(input_grad_rows(n)));
}

}  // namespace trellis::nn
