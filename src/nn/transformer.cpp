#include "trellis/nn/transformer.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/rng.hpp"
#include "trellis/kernels/swiglu.hpp"
#include "trellis/kernels/vector_ops.hpp"
#include "trellis/nn/buffer_pool.hpp"

#include <algorithm>
#include <optional>
#include <string>

namespace trellis::nn {

namespace {

int checked_dropout_d(const std::string& name, int d_model, float dropout) {
  if (!(dropout >= 0.0f && dropout < 1.0f)) {
    throw ConfigError("\"" + name + "\": dropout must be in [0, 1), got " +
                      std::to_string(dropout));
  }
  return d_model;
}

// The role of a norm's output (ln_1's, ln_2's). Under autocast the Linear it feeds keeps its
// own rounded copy for backward (and recomputes that copy after the norm is recomputed), so
// the fp32 output is read by that forward alone (or right after the norm's recomputation):
// transient. Without autocast the Linear's
// backward reads the output itself; under sequence parallelism the block gathers it again in
// backward: kept (cheap: recomputable).
BufferRole norm_output_role(const ParameterStore& store, const TensorParallel& tp) {
  return store.autocast().active() && !(tp.sequence && tp.active()) ? BufferRole::transient
                                                                    : BufferRole::cheap;
}

// out = a + b over rows [0, n), one pass.
void add_rows(ConstMatrix a, ConstMatrix b, Matrix out) {
  kernels::add(kernels::flat(a), kernels::flat(b), kernels::flat(out));
}

}  // namespace

FeedForward::FeedForward(ParameterStore& store, const std::string& name, const BlockSpec& spec,
                         int capacity_rows, const TransformerInit& init, TensorParallel tp)
    : Layer(name, checked_dropout_d(name, spec.d_model, spec.dropout), spec.d_model, capacity_rows,
            // Its input gradient is c_fc's, and without dropout its output c_proj's. The
            // output is read once, by the block's residual add (or reduce-scatter) right after,
            // and never by backward: transient.
            OwnBuffers{spec.dropout > 0.0f, false, BufferRole::transient}),
      kind_(spec.mlp),
      // SwiGLU: [gate; up] in two sections, so each rank's gate and up columns pair up.
      c_fc_(store, name + ".c_fc", spec.d_model,
            (spec.mlp == MlpKind::swiglu ? 2 : 1) * spec.ff_width(), capacity_rows,
            InitSpec::normal(init.std), spec.linear_bias_init(), Split::column, tp,
            spec.mlp == MlpKind::swiglu ? 2 : 1,
            // GELU's output is recomputable from its kept pre-activation; SwiGLU's gate and up
            // are what its backward reads. The input copy: of ln_2's output, recomputed. With
            // native 16-bit kernels the output is 16-bit, and so c_proj's input.
            LinearBuffers{spec.mlp == MlpKind::swiglu ? BufferRole::saved : BufferRole::cheap,
                          BufferRole::cheap, true}),
      c_proj_(store, name + ".c_proj", spec.ff_width(), spec.d_model, capacity_rows,
              InitSpec::normal(init.proj_std), spec.linear_bias_init(), Split::row, tp, 1,
              // Its input copy is recomputed; or it reads c_fc's 16-bit output.
              LinearBuffers{BufferRole::transient, BufferRole::cheap, false, true}),
      p_(spec.dropout),
      stream_(stream_from_name(name + ".dropout")),
      recompute_cheap_(spec.recompute_cheap) {
  const auto cap = static_cast<std::size_t>(capacity_rows);
  if (kind_ != MlpKind::swiglu) {  // c_fc + GELU in one layer
    c_fc_.fuse_activation(kind_ == MlpKind::gelu ? kernels::Activation::gelu
                                                 : kernels::Activation::gelu_tanh);
    if (recompute_cheap_) c_fc_.allow_recompute_activation();
  } else {
    const std::size_t h_size = cap * static_cast<std::size_t>(c_proj_.in_features());
    if (c_fc_.stores_half_output())
      swiglu16_ =
          layer_half_buffer(BufferRole::cheap, "trellis::nn::" + name + ".swiglu16", h_size);
    else
      swiglu_ = layer_buffer(BufferRole::cheap, "trellis::nn::" + name + ".swiglu", h_size);
    dgate_up_ = layer_buffer(BufferRole::scratch, "trellis::nn::" + name + ".dgate_up",
                             cap * static_cast<std::size_t>(c_fc_.out_features()));
  }
  TRELLIS_REQUIRE(c_fc_.stores_half_output() == c_proj_.reads_half_input(),
                  "mlp \"" + name + "\": c_fc's output and c_proj's input differ in format");
  // dx is c_fc's dx, and without dropout y is c_proj's y: no copies per call.
  share_input_grad_of(c_fc_);
  if (spec.dropout == 0.0f) share_output_of(c_proj_);
  if (spec.dropout > 0.0f)
    dz_ = layer_buffer(BufferRole::scratch, "trellis::nn::" + name + ".dz",
                       cap * static_cast<std::size_t>(spec.d_model));
}

void FeedForward::forward(ConstMatrix input, int n, const StepContext& ctx) {
  const ConstMatrix x = begin_forward(input, n);
  dropout_active_ = ctx.training && p_ > 0.0f;
  if (dropout_active_) {
    TRELLIS_REQUIRE(ctx.first_sample >= 0, "mlp \"" + name() + "\": negative first_sample");
    mask_ = kernels::DropoutMask{p_, ctx.seed,
                                 stream_mix(stream_, static_cast<std::uint64_t>(ctx.step)),
                                 static_cast<std::uint64_t>(ctx.first_sample)};
  }
  c_fc_.forward(x, n, ctx);
  if (kind_ == MlpKind::swiglu) {
    swiglu_forward(n);
    if (c_proj_.reads_half_input())
      c_proj_.forward_half(swiglu_half(n), n, ctx);
    else
      c_proj_.forward(as_matrix(swiglu_, n, c_proj_.in_features()), n, ctx);
  } else if (c_proj_.reads_half_input()) {
    c_proj_.forward_half(c_fc_.output_half(), n, ctx);
  } else {
    c_proj_.forward(c_fc_.output(), n, ctx);
  }
  const ConstMatrix z = kernels::first_rows(c_proj_.output(), n);
  if (dropout_active_) {
    kernels::dropout_apply(z, output_rows(n), mask_);
  } else if (p_ > 0.0f) {  // evaluation: dropout is the identity, but output() is its own buffer
    kernels::copy(kernels::flat(z), kernels::flat(output_rows(n)));
  }
}

void FeedForward::swiglu_forward(int n) {
  if (!c_fc_.stores_half_output())
    return kernels::swiglu_forward(kernels::first_rows(c_fc_.output(), n),
                                   as_matrix(swiglu_, n, c_proj_.in_features()));
  const kernels::GemmOperand gate_up = c_fc_.output_half();
  kernels::swiglu_forward_half(gate_up.format,
                               kernels::ConstHalfVector(gate_up.h16, n * gate_up.cols), n,
                               kernels::HalfVector(swiglu16_.data(), n * swiglu_half(n).cols));
}

kernels::GemmOperand FeedForward::swiglu_half(int n) const {
  return kernels::GemmOperand::half(swiglu16_.data(), c_fc_.output_half().format,
                                    static_cast<std::size_t>(n),
                                    static_cast<std::size_t>(c_proj_.in_features()));
}

void FeedForward::recompute_cheap(int n) {
  if (kind_ == MlpKind::swiglu)
    swiglu_forward(n);
  else
    c_fc_.recompute_activation(n);
  c_proj_.recompute_input_copy();
}

void FeedForward::backward(ConstMatrix output_grad, int n) {
  const ConstMatrix dy = begin_backward(output_grad, n);
  if (recompute_cheap_) recompute_cheap(n);  // c_proj's input, shared with the other blocks
  ConstMatrix dz = dy;
  if (dropout_active_) {
    const Matrix dzm = as_matrix(dz_, n, out_features());
    kernels::dropout_apply(dy, dzm, mask_);
    dz = dzm;
  }
  c_proj_.backward(dz, n);
  if (kind_ == MlpKind::swiglu) {
    const Matrix dgu = as_matrix(dgate_up_, n, c_fc_.out_features());
    const ConstMatrix dh = kernels::first_rows(c_proj_.input_grad(), n);
    if (c_fc_.stores_half_output()) {
      const kernels::GemmOperand gate_up = c_fc_.output_half();
      kernels::swiglu_backward_half(
          gate_up.format, kernels::ConstHalfVector(gate_up.h16, n * gate_up.cols), dh, dgu);
    } else {
      kernels::swiglu_backward(kernels::first_rows(c_fc_.output(), n), dh, dgu);
    }
    c_fc_.backward(dgu, n);  // writes this layer's input_grad() (shared)
    return;
  }
  c_fc_.backward(c_proj_.input_grad(), n);  // writes this layer's input_grad() (shared)
}

std::int64_t FeedForward::flops_per_sample() const {
  return c_fc_.flops_per_sample() + c_proj_.flops_per_sample();
}

Block::Block(ParameterStore& store, const std::string& name, const BlockSpec& spec,
             int capacity_rows, const TransformerInit& init, TensorParallel tp)
    : Layer(name, spec.d_model, spec.d_model, sequence_rows(name, capacity_rows, tp)),
      ln_1_(store, name + ".ln_1", spec.d_model, capacity(), spec.norm_eps, spec.norm,
            norm_output_role(store, tp)),
      attn_(store, name + ".attn", spec, capacity_rows, init, tp),
      ln_2_(store, name + ".ln_2", spec.d_model, capacity(), spec.norm_eps, spec.norm,
            norm_output_role(store, tp)),
      mlp_(store, name + ".mlp", spec, capacity_rows, init, tp),
      recompute_cheap_(spec.recompute_cheap),
      tp_(tp),
      store_(&store),
      sequence_(tp.sequence && tp.active()) {
  const auto size = static_cast<std::size_t>(capacity()) * static_cast<std::size_t>(spec.d_model);
  h_ = layer_buffer(BufferRole::saved, "trellis::nn::" + name + ".h", size);
  dh_ = layer_buffer(BufferRole::scratch, "trellis::nn::" + name + ".dh", size);
  if (sequence_) init_sequence(name, spec.d_model, static_cast<std::size_t>(capacity_rows));
}

void Block::forward(ConstMatrix input, int n, const StepContext& ctx) {
  if (sequence_) return forward_sequence(begin_forward(input, n), n, ctx);
  const ConstMatrix x = begin_forward(input, n);
  const int d = in_features();
  ln_1_.forward(x, n, ctx);
  attn_.forward(ln_1_.output(), n, ctx);
  const Matrix h = as_matrix(h_, n, d);
  add_rows(x, kernels::first_rows(attn_.output(), n), h);
  ln_2_.forward(h, n, ctx);
  mlp_.forward(ln_2_.output(), n, ctx);
  add_rows(h, kernels::first_rows(mlp_.output(), n), output_rows(n));
}

void Block::forward_cached(ConstMatrix x, int rows, int first_position, KvCache& cache) {
  TRELLIS_REQUIRE(!sequence_, "block \"" + name() +
                                  "\": generation runs without sequence parallelism "
                                  "(parallel.sequence_parallel = false)");
  StepContext eval;
  eval.training = false;
  const int d = in_features();
  const ConstMatrix xr = kernels::first_rows(x, rows);
  ln_1_.forward(xr, rows, eval);
  attn_.forward_cached(ln_1_.output(), rows, first_position, cache);
  const Matrix h = as_matrix(h_, rows, d);
  add_rows(xr, kernels::first_rows(attn_.output(), rows), h);
  ln_2_.forward(h, rows, eval);
  mlp_.forward(ln_2_.output(), rows, eval);
  add_rows(h, kernels::first_rows(mlp_.output(), rows), output_rows(rows));
}

void Block::backward(ConstMatrix output_grad, int n) {
  if (sequence_) return backward_sequence(begin_backward(output_grad, n), n);
  const ConstMatrix dy = begin_backward(output_grad, n);
  const int d = in_features();
  const StepContext any;  // the norms read no context
  // Selective recomputation: the norms' outputs (shared with the other blocks) again, from
  // their kept inputs, before the layers whose backward reads them.
  if (recompute_cheap_) {
    ln_2_.forward(as_matrix(h_, n, d), n, any);
    mlp_.recompute_input_copy();
  }
  mlp_.backward(dy, n);
  ln_2_.backward(mlp_.input_grad(), n);
  const Matrix dh = as_matrix(dh_, n, d);
  add_rows(dy, kernels::first_rows(ln_2_.input_grad(), n), dh);
  if (recompute_cheap_) {
    ln_1_.forward(saved_input(), n, any);
    attn_.recompute_input_copy();
  }
  attn_.backward(dh, n);
  ln_1_.backward(attn_.input_grad(), n);
  add_rows(dh, kernels::first_rows(ln_1_.input_grad(), n), input_grad_rows(n));
}

std::int64_t Block::flops_per_sample() const {
  return attn_.flops_per_sample() + mlp_.flops_per_sample();
}

}  // namespace trellis::nn
