#include "trellis/nn/attention.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/rng.hpp"
#include "trellis/kernels/flash_attention.hpp"
#include "trellis/kernels/vector_ops.hpp"

#include <cmath>
#include <string>

namespace trellis::nn {

namespace {

// Validates the arguments before anything is registered; returns d_model.
int checked_d_model(const std::string& name, int d_model, int n_head, int seq_len,
                    int capacity_rows, float dropout, const TensorParallel& tp) {
  if (d_model <= 0 || n_head <= 0 || d_model % n_head != 0) {
    throw ConfigError("attention \"" + name + "\": d_model (" + std::to_string(d_model) +
                      ") must be a positive multiple of n_head (" + std::to_string(n_head) + ")");
  }
  if (seq_len <= 0 || capacity_rows <= 0 || capacity_rows % seq_len != 0) {
    throw ConfigError("attention \"" + name + "\": capacity (" + std::to_string(capacity_rows) +
                      " rows) must be a positive multiple of seq_len (" + std::to_string(seq_len) +
                      ")");
  }
  if (n_head % tp.size() != 0) {
    throw ConfigError("attention \"" + name + "\": n_head (" + std::to_string(n_head) +
                      ") must be divisible by parallel.tp (" + std::to_string(tp.size()) + ")");
  }
  if (!(dropout >= 0.0f && dropout < 1.0f)) {
    throw ConfigError("attention \"" + name + "\": dropout must be in [0, 1), got " +
                      std::to_string(dropout));
  }
  return d_model;
}

FloatView buffer(const std::string& layer, const char* what, std::size_t size) {
  return FloatView("trellis::nn::" + layer + "." + what, size);
}

}  // namespace

CausalSelfAttention::CausalSelfAttention(ParameterStore& store, const std::string& name,
                                         int d_model, int n_head, int seq_len, int capacity_rows,
                                         float dropout, const TransformerInit& init,
                                         TensorParallel tp)
    : Layer(name, checked_d_model(name, d_model, n_head, seq_len, capacity_rows, dropout, tp),
            d_model, capacity_rows),
      // Heads split over tp: c_attn's q, k and v blocks each give this rank its heads' rows.
      c_attn_(store, name + ".c_attn", d_model, 3 * d_model, capacity_rows,
              InitSpec::normal(init.std), InitSpec::zeros(), Split::column, tp, 3),
      c_proj_(store, name + ".c_proj", d_model, d_model, capacity_rows,
              InitSpec::normal(init.proj_std), InitSpec::zeros(), Split::row, tp),
      d_(d_model / tp.size()),
      n_head_(n_head / tp.size()),
      logical_heads_(n_head),
      head_offset_(tp.rank() * (n_head / tp.size())),
      head_dim_(d_model / n_head),
      seq_len_(seq_len),
      p_(dropout),
      attn_stream_(stream_from_name(name + ".attn_dropout")),
      resid_stream_(stream_from_name(name + ".resid_dropout")) {
  const auto cap = static_cast<std::size_t>(capacity_rows);
  const auto rows_d = cap * static_cast<std::size_t>(d_);  // this rank's heads
  const auto per_head_row = cap * static_cast<std::size_t>(n_head_);
  yr_ = buffer(name, "yr", rows_d);
  lse_ = buffer(name, "lse", per_head_row);
  delta_ = buffer(name, "delta", per_head_row);
  dz_ = buffer(name, "dz", cap * static_cast<std::size_t>(d_model));  // whole width
  dqkv_ = buffer(name, "dqkv", 3 * rows_d);
}

void CausalSelfAttention::forward(ConstMatrix input, int n, const StepContext& ctx) {
  const ConstMatrix x = begin_forward(input, n);
  TRELLIS_REQUIRE(n % seq_len_ == 0, "attention \"" + name() + "\": " + std::to_string(n) +
                                         " rows are no whole sequences of " +
                                         std::to_string(seq_len_));
  dropout_active_ = ctx.training && p_ > 0.0f;
  if (dropout_active_) {
    TRELLIS_REQUIRE(ctx.first_sample >= 0 && ctx.first_sample % seq_len_ == 0,
                    "attention \"" + name() + "\": first_sample " +
                        std::to_string(ctx.first_sample) + " is no token row of a sequence start");
    const auto step = static_cast<std::uint64_t>(ctx.step);
    const auto first_row = static_cast<std::uint64_t>(ctx.first_sample);
    attn_mask_ = kernels::DropoutMask{p_, ctx.seed, stream_mix(attn_stream_, step),
                                      first_row * static_cast<std::uint64_t>(logical_heads_)};
    if (n_head_ != logical_heads_) {
      // This rank's heads are [head_offset_, head_offset_ + n_head_) of every sequence's.
      const auto T = static_cast<std::uint64_t>(seq_len_);
      attn_mask_.group_rows = static_cast<std::uint64_t>(n_head_) * T;
      attn_mask_.logical_group_rows = static_cast<std::uint64_t>(logical_heads_) * T;
      attn_mask_.group_offset = static_cast<std::uint64_t>(head_offset_) * T;
    }
    resid_mask_ = kernels::DropoutMask{p_, ctx.seed, stream_mix(resid_stream_, step), first_row};
  }
  last_rows_ = n;
  c_attn_.forward(x, n, ctx);
  const ConstMatrix qkv = kernels::first_rows(c_attn_.output(), n);  // [n, 3d]
  const Matrix yr = as_matrix(yr_, n, d_);                           // [n, d]
  kernels::flash_attention_forward(qkv, shape(), yr, lse_rows(n), active_attn_mask());

  c_proj_.forward(yr, n, ctx);
  const ConstMatrix z = kernels::first_rows(c_proj_.output(), n);
  if (dropout_active_) {
    kernels::dropout_apply(z, output_rows(n), resid_mask_);
  } else {
    kernels::copy(kernels::flat(z), kernels::flat(output_rows(n)));
  }
}

void CausalSelfAttention::backward(ConstMatrix output_grad, int n) {
  const ConstMatrix dy = begin_backward(output_grad, n);
  ConstMatrix dz = dy;
  if (dropout_active_) {
    const Matrix dzm = as_matrix(dz_, n, out_features());
    kernels::dropout_apply(dy, dzm, resid_mask_);
    dz = dzm;
  }
  c_proj_.backward(dz, n);
  const ConstMatrix dyr = kernels::first_rows(c_proj_.input_grad(), n);  // [n, d]
  const ConstMatrix qkv = kernels::first_rows(c_attn_.output(), n);
  const Matrix dqkv = as_matrix(dqkv_, n, 3 * d_);
  kernels::flash_attention_backward(qkv, as_matrix(yr_, n, d_), dyr, lse_rows(n), shape(),
                                    kernels::Vector(delta_.data(), lse_rows(n).extent(0)), dqkv,
                                    active_attn_mask());
  c_attn_.backward(dqkv, n);
  kernels::copy(kernels::flat(kernels::first_rows(c_attn_.input_grad(), n)),
                kernels::flat(input_grad_rows(n)));
}

std::int64_t CausalSelfAttention::flops_per_sample() const {
  return c_attn_.flops_per_sample() + c_proj_.flops_per_sample() +
         12 * static_cast<std::int64_t>(seq_len_) * d_;
}

kernels::FlashAttentionShape CausalSelfAttention::shape() const {
  return kernels::FlashAttentionShape{n_head_, seq_len_};
}

kernels::Vector CausalSelfAttention::lse_rows(int n) const {
  return kernels::Vector(lse_.data(), static_cast<std::size_t>(n) * n_head_);
}

kernels::DropoutMask CausalSelfAttention::active_attn_mask() const {
  return dropout_active_ ? attn_mask_ : kernels::DropoutMask{};
}

kernels::ConstVector CausalSelfAttention::logsumexp() const { return lse_rows(last_rows_); }

}  // namespace trellis::nn
