#include "trellis/nn/attention.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/rng.hpp"
#include "trellis/kernels/attention.hpp"
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
  const auto att = cap * static_cast<std::size_t>(n_head_) * static_cast<std::size_t>(seq_len);
  q_ = buffer(name, "q", rows_d);
  k_ = buffer(name, "k", rows_d);
  v_ = buffer(name, "v", rows_d);
  yh_ = buffer(name, "yh", rows_d);
  yr_ = buffer(name, "yr", rows_d);
  att_ = buffer(name, "att", att);
  if (dropout > 0.0f) attd_ = buffer(name, "att_dropped", att);
  datt_ = buffer(name, "datt", att);
  dyh_ = buffer(name, "dyh", rows_d);
  dq_ = buffer(name, "dq", rows_d);
  dk_ = buffer(name, "dk", rows_d);
  dv_ = buffer(name, "dv", rows_d);
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
  const int T = seq_len_, H = n_head_, hd = head_dim_;
  const int batch = n / T * H;  // (sequence, head) pairs
  const auto rows = static_cast<std::size_t>(n);
  const auto att_rows = static_cast<std::size_t>(batch) * static_cast<std::size_t>(T);
  const auto heads_size = rows * static_cast<std::size_t>(d_);

  c_attn_.forward(x, n, ctx);
  const ConstMatrix qkv = kernels::first_rows(c_attn_.output(), n);  // [n, 3d]
  const kernels::Vector q(q_.data(), heads_size), k(k_.data(), heads_size),
      v(v_.data(), heads_size);
  kernels::split_heads(qkv, 0, d_, H, T, q);
  kernels::split_heads(qkv, d_, d_, H, T, k);
  kernels::split_heads(qkv, 2 * d_, d_, H, T, v);

  const ConstMatrix qm(q_.data(), att_rows, hd), km(k_.data(), att_rows, hd),
      vm(v_.data(), att_rows, hd);
  const Matrix att(att_.data(), att_rows, T);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  kernels::gemm_batched(false, true, scale, qm, km, 0.0f, att, batch);  // s = q k^T / sqrt(hd)
  kernels::causal_softmax_forward(att);
  ConstMatrix attd = att;
  if (dropout_active_) {
    const Matrix dropped(attd_.data(), att_rows, T);
    kernels::causal_dropout_apply(att, dropped, attn_mask_);
    attd = dropped;
  }
  const Matrix yh(yh_.data(), att_rows, hd);
  kernels::gemm_batched(false, false, 1.0f, attd, vm, 0.0f, yh, batch);  // yh = attd v
  const Matrix yr = as_matrix(yr_, n, d_);
  kernels::merge_heads(kernels::ConstVector(yh_.data(), heads_size), d_, H, T, yr, 0);

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
  const int T = seq_len_, H = n_head_, hd = head_dim_;
  const int batch = n / T * H;
  const auto rows = static_cast<std::size_t>(n);
  const auto att_rows = static_cast<std::size_t>(batch) * static_cast<std::size_t>(T);
  const auto heads_size = rows * static_cast<std::size_t>(d_);

  ConstMatrix dz = dy;
  if (dropout_active_) {
    const Matrix dzm = as_matrix(dz_, n, out_features());
    kernels::dropout_apply(dy, dzm, resid_mask_);
    dz = dzm;
  }
  c_proj_.backward(dz, n);
  const ConstMatrix dyr = kernels::first_rows(c_proj_.input_grad(), n);  // [n, d]
  kernels::split_heads(dyr, 0, d_, H, T, kernels::Vector(dyh_.data(), heads_size));

  const ConstMatrix qm(q_.data(), att_rows, hd), km(k_.data(), att_rows, hd),
      vm(v_.data(), att_rows, hd), dyh(dyh_.data(), att_rows, hd);
  const ConstMatrix att(att_.data(), att_rows, T);
  const ConstMatrix attd = dropout_active_ ? ConstMatrix(attd_.data(), att_rows, T) : att;
  const Matrix datt(datt_.data(), att_rows, T);
  kernels::gemm_batched(true, false, 1.0f, attd, dyh, 0.0f, Matrix(dv_.data(), att_rows, hd),
                        batch);                                                // dv = attd^T dyh
  kernels::gemm_batched(false, true, 1.0f, dyh, vm, 0.0f, datt, batch);        // dattd = dyh v^T
  if (dropout_active_) kernels::causal_dropout_apply(datt, datt, attn_mask_);  // datt
  kernels::causal_softmax_backward(att, datt);                                 // ds (unscaled)
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  kernels::gemm_batched(false, false, scale, datt, km, 0.0f, Matrix(dq_.data(), att_rows, hd),
                        batch);  // dq = ds k
  kernels::gemm_batched(true, false, scale, datt, qm, 0.0f, Matrix(dk_.data(), att_rows, hd),
                        batch);  // dk = ds^T q

  const Matrix dqkv = as_matrix(dqkv_, n, 3 * d_);
  kernels::merge_heads(kernels::ConstVector(dq_.data(), heads_size), d_, H, T, dqkv, 0);
  kernels::merge_heads(kernels::ConstVector(dk_.data(), heads_size), d_, H, T, dqkv, d_);
  kernels::merge_heads(kernels::ConstVector(dv_.data(), heads_size), d_, H, T, dqkv, 2 * d_);
  c_attn_.backward(dqkv, n);
  kernels::copy(kernels::flat(kernels::first_rows(c_attn_.input_grad(), n)),
                kernels::flat(input_grad_rows(n)));
}

std::int64_t CausalSelfAttention::flops_per_sample() const {
  return c_attn_.flops_per_sample() + c_proj_.flops_per_sample() +
         12 * static_cast<std::int64_t>(seq_len_) * d_;
}

ConstMatrix CausalSelfAttention::probabilities() const {
  const auto att_rows = static_cast<std::size_t>(last_rows_) * static_cast<std::size_t>(n_head_);
  return ConstMatrix(att_.data(), att_rows, static_cast<std::size_t>(seq_len_));
}

}  // namespace trellis::nn
