#include "trellis/nn/attention.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/rng.hpp"
#include "trellis/kernels/attention/cached_attention.hpp"
#include "trellis/kernels/attention/flash_attention.hpp"
#include "trellis/kernels/attention/rope.hpp"
#include "trellis/kernels/precision_cast.hpp"
#include "trellis/kernels/vector_ops.hpp"
#include "trellis/nn/buffer_pool.hpp"

#include <cmath>
#include <optional>
#include <string>

namespace trellis::nn {

namespace {

// Validates the arguments before anything is registered; returns d_model.
int checked_d_model(const std::string& name, const BlockSpec& spec, int capacity_rows,
                    const TensorParallel& tp) {
  const int d_model = spec.d_model, n_head = spec.n_head, kv = spec.kv_heads();
  if (d_model <= 0 || n_head <= 0 || d_model % n_head != 0) {
    throw ConfigError("attention \"" + name + "\": d_model (" + std::to_string(d_model) +
                      ") must be a positive multiple of n_head (" + std::to_string(n_head) + ")");
  }
  if (kv <= 0 || n_head % kv != 0) {
    throw ConfigError("attention \"" + name + "\": model.n_kv_head (" + std::to_string(kv) +
                      ") must divide model.n_head (" + std::to_string(n_head) + ")");
  }
  if (spec.seq_len <= 0 || capacity_rows <= 0 || capacity_rows % spec.seq_len != 0) {
    throw ConfigError("attention \"" + name + "\": capacity (" + std::to_string(capacity_rows) +
                      " rows) must be a positive multiple of seq_len (" +
                      std::to_string(spec.seq_len) + ")");
  }
  if (n_head % tp.size() != 0 || kv % tp.size() != 0) {
    throw ConfigError("attention \"" + name + "\": model.n_head (" + std::to_string(n_head) +
                      ") and model.n_kv_head (" + std::to_string(kv) +
                      ") must be divisible by parallel.tp (" + std::to_string(tp.size()) + ")");
  }
  if (!(spec.dropout >= 0.0f && spec.dropout < 1.0f)) {
    throw ConfigError("attention \"" + name + "\": dropout must be in [0, 1), got " +
                      std::to_string(spec.dropout));
  }
  const int head_dim = d_model / n_head;
  if (spec.rope != nullptr &&
      (spec.rope->head_dim != head_dim || spec.rope->positions < spec.seq_len)) {
    throw ConfigError("attention \"" + name + "\": rotary tables for head_dim " +
                      std::to_string(spec.rope->head_dim) + " and " +
                      std::to_string(spec.rope->positions) + " positions, need " +
                      std::to_string(head_dim) + " and " + std::to_string(spec.seq_len));
  }
  return d_model;
}

// Whether the attention keeps 16-bit copies for backward (native autocast).
bool keeps_half(const ParameterStore& store) {
  return store.autocast().active() && store.autocast().native;
}

// The words of `words` that hold m's elements.
kernels::HalfVector half_rows(const kernels::HalfView& words, const ConstMatrix& m) {
  return kernels::HalfVector(words.data(), m.extent(0) * m.extent(1));
}

FloatView buffer(BufferRole role, const std::string& layer, const char* what, std::size_t size) {
  return layer_buffer(role, "trellis::nn::" + layer + "." + what, size);
}

}  // namespace

CausalSelfAttention::CausalSelfAttention(ParameterStore& store, const std::string& name,
                                         const BlockSpec& spec, int capacity_rows,
                                         const TransformerInit& init, TensorParallel tp)
    : Layer(name, checked_d_model(name, spec, capacity_rows, tp), spec.d_model, capacity_rows,
            // Its input gradient is c_attn's, and without dropout its output c_proj's. The
            // output is read once, by the block's residual add (or reduce-scatter) right after,
            // and never by backward: transient.
            OwnBuffers{spec.dropout > 0.0f, false, BufferRole::transient}),
      // Heads split over tp. Multi-head: c_attn's q, k and v blocks each give this rank its
      // heads' rows (3 sections); grouped: its whole kv groups, one equal piece.
      c_attn_(store, name + ".c_attn", spec.d_model,
              (spec.n_head + 2 * spec.kv_heads()) * (spec.d_model / spec.n_head), capacity_rows,
              InitSpec::normal(init.std), spec.linear_bias_init(), Split::column, tp,
              spec.kv_heads() == spec.n_head ? 3 : 1,
              // Its input (a norm's output) may be recomputed, and then its copy too. Its
              // output is transient where backward reads the 16-bit copy instead.
              LinearBuffers{keeps_half(store) ? BufferRole::transient : BufferRole::saved,
                            BufferRole::cheap}),
      c_proj_(store, name + ".c_proj", spec.d_model, spec.d_model, capacity_rows,
              InitSpec::normal(init.proj_std), spec.linear_bias_init(), Split::row, tp, 1,
              // Its output: see above; its input: yr16 where kept.
              LinearBuffers{BufferRole::transient, BufferRole::saved, false, true}),
      d_(spec.d_model / tp.size()),
      n_head_(spec.n_head / tp.size()),
      layout_{spec.n_head / tp.size(), spec.kv_heads() / tp.size(), spec.d_model / spec.n_head},
      rope_(spec.rope),
      logical_heads_(spec.n_head),
      head_offset_(tp.rank() * (spec.n_head / tp.size())),
      head_dim_(spec.d_model / spec.n_head),
      seq_len_(spec.seq_len),
      p_(spec.dropout),
      attn_stream_(stream_from_name(name + ".attn_dropout")),
      resid_stream_(stream_from_name(name + ".resid_dropout")) {
  const auto cap = static_cast<std::size_t>(capacity_rows);
  const auto rows_d = cap * static_cast<std::size_t>(d_);  // this rank's heads
  const auto per_head_row = cap * static_cast<std::size_t>(n_head_);
  half_saved_ = keeps_half(store);
  autocast_ = store.autocast();
  yr_ = buffer(half_saved_ ? BufferRole::transient : BufferRole::saved, name, "yr", rows_d);
  if (half_saved_) {
    qkv16_ = layer_half_buffer(BufferRole::saved, "trellis::nn::" + name + ".qkv16",
                               cap * static_cast<std::size_t>(layout_.width()));
    yr16_ = layer_half_buffer(BufferRole::saved, "trellis::nn::" + name + ".yr16", rows_d);
  }
  TRELLIS_REQUIRE(half_saved_ == c_proj_.reads_half_input(),
                  "attention \"" + name + "\": yr and c_proj's input differ in format");
  lse_ = buffer(BufferRole::saved, name, "lse", per_head_row);
  delta_ = buffer(BufferRole::scratch, name, "delta", per_head_row);
  dz_ = buffer(BufferRole::scratch, name, "dz", cap * static_cast<std::size_t>(spec.d_model));
  dqkv_ =
      buffer(BufferRole::scratch, name, "dqkv", cap * static_cast<std::size_t>(layout_.width()));
  share_input_grad_of(c_attn_);
  if (spec.dropout == 0.0f) share_output_of(c_proj_);
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
  const ConstMatrix qkv = kernels::first_rows(c_attn_.output(), n);  // [n, layout_.width()]
  if (rope_ != nullptr) {
    // In place on c_attn's output: this layer owns c_attn, and nothing else reads that buffer
    // (c_attn's backward needs its input, not its output), so no second [n, width] buffer.
    const Matrix turned(const_cast<float*>(qkv.data()), qkv.extent(0), qkv.extent(1));
    kernels::rope_forward(turned, layout_, seq_len_, 0, rope_->cos, rope_->sin);
    // The flash kernels read what backward will: the 16-bit values.
    if (half_saved_) round_in_place(autocast_, turned);
  }
  const Precision format = autocast_.mode;
  if (half_saved_) kernels::to_half(format, kernels::flat(qkv), half_rows(qkv16_, qkv));
  const Matrix yr = as_matrix(yr_, n, d_);  // [n, d]
  kernels::flash_attention_forward(qkv, shape(), yr, lse_rows(n), active_attn_mask());
  if (half_saved_) {
    kernels::to_half(format, kernels::flat(yr), half_rows(yr16_, yr));
    c_proj_.forward_half(kernels::GemmOperand::half(yr16_.data(), format, n, d_), n, ctx);
  } else {
    c_proj_.forward(yr, n, ctx);
  }
  const ConstMatrix z = kernels::first_rows(c_proj_.output(), n);
  if (dropout_active_) {
    kernels::dropout_apply(z, output_rows(n), resid_mask_);
  } else if (p_ > 0.0f) {  // evaluation: dropout is the identity, but output() is its own buffer
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
  if (half_saved_) {  // the transient fp32 qkv and yr again, from the 16-bit copies
    const Precision format = autocast_.mode;
    const Matrix qkv_rows(const_cast<float*>(qkv.data()), qkv.extent(0), qkv.extent(1));
    kernels::from_half(format, half_rows(qkv16_, qkv), kernels::flat(qkv_rows));
    const Matrix yr = as_matrix(yr_, n, d_);
    kernels::from_half(format, half_rows(yr16_, yr), kernels::flat(yr));
  }
  const Matrix dqkv = as_matrix(dqkv_, n, static_cast<int>(layout_.width()));
  kernels::flash_attention_backward(qkv, as_matrix(yr_, n, d_), dyr, lse_rows(n), shape(),
                                    kernels::Vector(delta_.data(), lse_rows(n).extent(0)), dqkv,
                                    active_attn_mask());
  if (rope_ != nullptr) kernels::rope_backward(dqkv, layout_, seq_len_, 0, rope_->cos, rope_->sin);
  c_attn_.backward(dqkv, n);  // writes this layer's input_grad() (shared)
}

KvCache CausalSelfAttention::make_cache(int positions) const {
  const auto size = static_cast<std::size_t>(positions) *
                    static_cast<std::size_t>(layout_.n_kv_head * layout_.head_dim);
  KvCache cache;
  cache.k = FloatView("trellis::nn::" + name() + ".k_cache", size);  // the cache's own
  cache.v = FloatView("trellis::nn::" + name() + ".v_cache", size);
  cache.positions = positions;
  return cache;
}

void CausalSelfAttention::forward_cached(ConstMatrix x, int rows, int first_position,
                                         KvCache& cache) {
  const int kvd = static_cast<int>(layout_.n_kv_head * layout_.head_dim);
  TRELLIS_REQUIRE(rows > 0 && first_position >= 0 && first_position + rows <= cache.positions &&
                      (rope_ == nullptr || first_position + rows <= rope_->positions),
                  "attention \"" + name() + "\": positions [" + std::to_string(first_position) +
                      ", " + std::to_string(first_position + rows) + ") beyond the cache's " +
                      std::to_string(cache.positions) + " or the rotary tables");
  StepContext eval;
  eval.training = false;
  dropout_active_ = false;
  c_attn_.forward(x, rows, eval);
  const ConstMatrix qkv = kernels::first_rows(c_attn_.output(), rows);
  if (rope_ != nullptr) {
    const Matrix turned(const_cast<float*>(qkv.data()), qkv.extent(0), qkv.extent(1));
    kernels::rope_forward(turned, layout_, rows, first_position, rope_->cos, rope_->sin);
  }
  const Matrix k = as_matrix(cache.k, cache.positions, kvd);
  const Matrix v = as_matrix(cache.v, cache.positions, kvd);
  kernels::append_kv_cache(qkv, layout_, first_position, k, v);
  const Matrix yr = as_matrix(yr_, rows, d_);
  kernels::cached_attention(qkv, layout_, k, v, first_position, yr);
  if (half_saved_) {
    kernels::to_half(autocast_.mode, kernels::flat(yr), half_rows(yr16_, yr));
    c_proj_.forward_half(kernels::GemmOperand::half(yr16_.data(), autocast_.mode, rows, d_), rows,
                         eval);
  } else {
    c_proj_.forward(yr, rows, eval);
  }
  if (p_ > 0.0f)
    kernels::copy(kernels::flat(kernels::first_rows(c_proj_.output(), rows)),
                  kernels::flat(output_rows(rows)));
}

std::int64_t CausalSelfAttention::flops_per_sample() const {
  return c_attn_.flops_per_sample() + c_proj_.flops_per_sample() +
         12 * static_cast<std::int64_t>(seq_len_) * d_;
}

kernels::FlashAttentionShape CausalSelfAttention::shape() const {
  return kernels::FlashAttentionShape{n_head_, seq_len_, static_cast<int>(layout_.n_kv_head)};
}

kernels::Vector CausalSelfAttention::lse_rows(int n) const {
  return kernels::Vector(lse_.data(), static_cast<std::size_t>(n) * n_head_);
}

kernels::DropoutMask CausalSelfAttention::active_attn_mask() const {
  return dropout_active_ ? attn_mask_ : kernels::DropoutMask{};
}

kernels::ConstVector CausalSelfAttention::logsumexp() const { return lse_rows(last_rows_); }

}  // namespace trellis::nn
