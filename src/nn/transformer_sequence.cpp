// Block under sequence parallelism (tensor_parallel.hpp, Megatron-SP): the residual stream, the
// norms and the block's saved inputs hold this tp rank's rows only; the attention and the MLP
// run on all rows between an all-gather and a reduce-scatter.
//
//   forward  x[n] -> ln_1 -> all-gather [tp n] -> attention (partial sums) -> reduce-scatter
//            -> h = x + . -> ln_2 -> all-gather -> MLP (partial sums) -> reduce-scatter -> + h
//   backward the mirror: each output gradient all-gathered before the attention's / MLP's
//            backward, their partial input gradients reduce-scattered before the norm's; the
//            norm's output is all-gathered again (its gathered buffer is scratch, shared by the
//            blocks of a parity), so only the rank's own rows are kept between the passes.
//
// Dropout inside the attention and the MLP applies its (row-keyed) mask to each rank's partial
// sum: the mask is a per-element scale, so the sum of the masked partials is the masked sum.
#include "trellis/core/error.hpp"
#include "trellis/kernels/vector_ops.hpp"
#include "trellis/nn/buffer_pool.hpp"
#include "trellis/nn/transformer.hpp"

#include <string>

namespace trellis::nn {

int Block::sequence_rows(const std::string& name, int capacity_rows, const TensorParallel& tp) {
  if (!(tp.sequence && tp.active())) return capacity_rows;
  if (capacity_rows % tp.size() != 0)
    throw ConfigError("block \"" + name + "\": " + std::to_string(capacity_rows) +
                      " token rows do not split over parallel.tp = " + std::to_string(tp.size()) +
                      " for sequence parallelism (model.seq_len must be a multiple of it)");
  return capacity_rows / tp.size();
}

void Block::init_sequence(const std::string& name, int d_model, std::size_t capacity_rows) {
  const auto d = static_cast<std::size_t>(d_model);
  const auto local = static_cast<std::size_t>(capacity()) * d;
  gathered_ =
      layer_buffer(BufferRole::scratch, "trellis::nn::" + name + ".gathered", capacity_rows * d);
  dgathered_ =
      layer_buffer(BufferRole::scratch, "trellis::nn::" + name + ".dgathered", capacity_rows * d);
  dnorm_ = layer_buffer(BufferRole::scratch, "trellis::nn::" + name + ".dnorm", local);
  norm_grads_ = layer_buffer(BufferRole::own, "trellis::nn::" + name + ".norm_grads", 2 * d);
  attn_.defer_tp_reductions();
  mlp_.defer_tp_reductions();
}

Matrix Block::gather_rows(ConstMatrix rows, int n, const FloatView& all) const {
  const int d = in_features();
  const std::size_t count = static_cast<std::size_t>(n) * static_cast<std::size_t>(d);
  const Matrix out = as_matrix(all, n * tp_.size(), d);
  tp_.comm->all_gather(rows.data(), out.data(), count);
  return out;
}

void Block::scatter_rows(ConstMatrix partial, int n, Matrix out) const {
  const std::size_t count = static_cast<std::size_t>(n) * static_cast<std::size_t>(in_features());
  tp_.comm->reduce_scatter(partial.data(), out.data(), count, ReduceOp::sum);
}

void Block::norm_backward(LayerNorm& norm, ConstMatrix dx, int n) {
  // This call's contribution alone, summed over tp, then added to what was accumulated before.
  ParameterStore& store = *store_;
  std::size_t params[2] = {norm.weight_index(), 0};
  int count = 1;
  if (norm.bias_index()) params[count++] = *norm.bias_index();
  const auto d = static_cast<std::size_t>(in_features());
  for (int i = 0; i < count; ++i) {
    const kernels::Vector grad = store.grad_vector(params[i]);
    kernels::copy(grad, kernels::Vector(norm_grads_.data() + i * d, d));
    kernels::fill(grad, 0.0f);
  }
  norm.backward(dx, n);
  for (int i = 0; i < count; ++i) {
    const kernels::Vector grad = store.grad_vector(params[i]);
    tp_.comm->all_reduce(grad.data(), d, ReduceOp::sum);
    kernels::axpy(1.0f, kernels::ConstVector(norm_grads_.data() + i * d, d), grad);
  }
}

void Block::forward_sequence(ConstMatrix x, int n, const StepContext& ctx) {
  const int d = in_features(), all = n * tp_.size();
  ln_1_.forward(x, n, ctx);
  attn_.forward(gather_rows(ln_1_.output(), n, gathered_), all, ctx);
  const Matrix h = as_matrix(h_, n, d);
  scatter_rows(kernels::first_rows(attn_.output(), all), n, h);
  kernels::add(kernels::flat(x), kernels::flat(h), kernels::flat(h));
  ln_2_.forward(h, n, ctx);
  mlp_.forward(gather_rows(ln_2_.output(), n, gathered_), all, ctx);
  const Matrix y = output_rows(n);
  scatter_rows(kernels::first_rows(mlp_.output(), all), n, y);
  kernels::add(kernels::flat(h), kernels::flat(y), kernels::flat(y));
}

void Block::backward_sequence(ConstMatrix dy, int n) {
  const int d = in_features(), all = n * tp_.size();
  const StepContext any;  // the norms read no context
  const Matrix h = as_matrix(h_, n, d);
  // The MLP's input again (the gathered buffer is shared), recomputed first if selective.
  if (recompute_cheap_) ln_2_.forward(h, n, any);
  gather_rows(ln_2_.output(), n, gathered_);
  mlp_.recompute_input_copy();
  mlp_.backward(gather_rows(dy, n, dgathered_), all);
  const Matrix dnorm = as_matrix(dnorm_, n, d);
  scatter_rows(kernels::first_rows(mlp_.input_grad(), all), n, dnorm);
  norm_backward(ln_2_, dnorm, n);
  const Matrix dh = as_matrix(dh_, n, d);
  kernels::add(kernels::flat(dy), kernels::flat(kernels::first_rows(ln_2_.input_grad(), n)),
               kernels::flat(dh));
  if (recompute_cheap_) ln_1_.forward(saved_input(), n, any);
  gather_rows(ln_1_.output(), n, gathered_);
  attn_.recompute_input_copy();
  attn_.backward(gather_rows(dh, n, dgathered_), all);
  scatter_rows(kernels::first_rows(attn_.input_grad(), all), n, dnorm);
  norm_backward(ln_1_, dnorm, n);
  kernels::add(kernels::flat(dh), kernels::flat(kernels::first_rows(ln_1_.input_grad(), n)),
               kernels::flat(input_grad_rows(n)));
}

}  // namespace trellis::nn
