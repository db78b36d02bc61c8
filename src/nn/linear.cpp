#include "trellis/nn/linear.hpp"

#include "trellis/core/error.hpp"
#include "trellis/kernels/bias.hpp"
#include "trellis/kernels/bias_activation_half.hpp"
#include "trellis/kernels/gemm.hpp"
#include "trellis/kernels/vector_ops.hpp"

#include <algorithm>
#include <cmath>

namespace trellis::nn {

LinearInit parse_linear_init(const std::string& name) {
  if (name == "kaiming") return LinearInit::kaiming;
  if (name == "xavier") return LinearInit::xavier;
  throw ConfigError("unknown init \"" + name + "\" (expected kaiming or xavier)");
}

namespace {
const double kLinearGain = 1.0 / std::sqrt(3.0);  // PyTorch: kaiming_uniform_(a=sqrt(5))

InitSpec default_weight_init(LinearInit init, int in_features, int out_features) {
  return init == LinearInit::kaiming ? InitSpec::kaiming_uniform(in_features, kLinearGain)
                                     : InitSpec::xavier_uniform(in_features, out_features);
}
InitSpec default_bias_init(LinearInit init, int in_features) {
  return init == LinearInit::kaiming ? InitSpec::kaiming_uniform(in_features, kLinearGain)
                                     : InitSpec::zeros();
}
}  // namespace

Linear::Linear(ParameterStore& store, const std::string& name, int in_features, int out_features,
               int capacity, LinearInit init, Split split, TensorParallel tp)
    : Linear(store, name, in_features, out_features, capacity,
             default_weight_init(init, in_features, out_features),
             default_bias_init(init, in_features), split, tp) {}

namespace {

// This rank's share of a logical extent split over tp (ConfigError when it does not divide).
int local_extent(const std::string& name, const char* what, int extent, Split split, Split along,
                 const TensorParallel& tp) {
  if (split != along || !tp.active()) return extent;
  if (extent % tp.size() != 0)
    throw ConfigError("layer \"" + name + "\": " + what + " " + std::to_string(extent) +
                      " is not divisible by parallel.tp = " + std::to_string(tp.size()));
  return extent / tp.size();
}

// Whether a 16-bit buffer asked for in LinearBuffers is used: with native kernels only.
bool native_half(const ParameterStore& store, bool asked) {
  return asked && store.autocast().active() && store.autocast().native;
}

}  // namespace

Linear::Linear(ParameterStore& store, const std::string& name, int in_features, int out_features,
               int capacity, const InitSpec& weight_init, const std::optional<InitSpec>& bias_init,
               Split split, TensorParallel tp, int sections, const LinearBuffers& buffers)
    : Layer(name, local_extent(name, "in_features", in_features, split, Split::row, tp),
            local_extent(name, "out_features", out_features, split, Split::column, tp), capacity,
            OwnBuffers{!native_half(store, buffers.half_output), true, buffers.output}),
      store_(&store),
      split_(tp.active() ? split : Split::none),
      tp_(tp),
      half_output_(native_half(store, buffers.half_output)),
      half_input_(native_half(store, buffers.half_input)) {
  TRELLIS_REQUIRE(!(half_output_ && split_ == Split::row),
                  "linear \"" + name + "\": a row-parallel Linear keeps an fp32 output");
  const Shape w_shape{out_features, in_features};
  // The output rows' shard: column-parallel splits W's rows and b; otherwise b is whole.
  const ShardSpec rows =
      split_ == Split::column ? ShardSpec::split(0, tp.size(), tp.rank(), sections) : ShardSpec{};
  const ShardSpec w_shard = split_ == Split::row ? ShardSpec::split(1, tp.size(), tp.rank()) : rows;
  weight_ = store.add(name + ".weight", w_shape, weight_init, true, w_shard);
  if (bias_init) {
    bias_ = store.add(name + ".bias", {out_features}, *bias_init, false, rows);
  } else {
    const auto out = static_cast<std::size_t>(this->out_features());
    zero_bias_ = FloatView("trellis::nn::" + name + ".zero_bias", out);
    db_discard_ = layer_buffer(BufferRole::scratch, "trellis::nn::" + name + ".db_discard", out);
  }
  const auto cap = static_cast<std::size_t>(capacity);
  const std::size_t out_size = cap * static_cast<std::size_t>(this->out_features());
  if (half_output_) {
    y16_ = layer_half_buffer(buffers.output, "trellis::nn::" + name + ".output16", out_size);
    gemm_out_ = layer_buffer(BufferRole::transient, "trellis::nn::" + name + ".gemm_out", out_size);
  }
  if (!half_input_)
    x16_ = AutocastOperand(store.autocast(), name + ".x16",
                           cap * static_cast<std::size_t>(this->in_features()), buffers.input_copy);
  dz16_ =
      AutocastOperand(store.autocast(), name + ".dz16",
                      cap * static_cast<std::size_t>(this->out_features()), BufferRole::scratch);
}

void Linear::fuse_activation(kernels::Activation f) {
  activation_ = f;
  const auto size = static_cast<std::size_t>(capacity()) * static_cast<std::size_t>(out_features());
  if (half_output_) {  // z16 kept where backward needs z; dz goes straight into dz16
    if (kernels::keeps_pre_activation(f))
      z16_ = layer_half_buffer(BufferRole::saved, "trellis::nn::" + name() + ".pre_activation16",
                               size);
    return;
  }
  pre_activation_ =
      kernels::keeps_pre_activation(f)
          ? layer_buffer(BufferRole::saved, "trellis::nn::" + name() + ".pre_activation", size)
          : FloatView();
  dz_ = f != kernels::Activation::none
            ? layer_buffer(BufferRole::scratch, "trellis::nn::" + name() + ".dz", size)
            : FloatView();
}

void Linear::forward(ConstMatrix input, int n, const StepContext&) {
  TRELLIS_REQUIRE(!half_input_, "linear \"" + name() + "\": takes a 16-bit input (forward_half)");
  // Parameters first: a store that is not finalized throws before the call is recorded.
  store_->compute_operand(weight_);
  forward_from(x16_.round(begin_forward(input, n)), n);  // x [n, in]
}

void Linear::forward_half(const kernels::GemmOperand& input, int n, const StepContext&) {
  TRELLIS_REQUIRE(half_input_, "linear \"" + name() + "\": takes an fp32 input (forward)");
  const Precision format = store_->autocast().mode;
  if (!input.is_half() || input.format != format ||
      input.cols != static_cast<std::size_t>(in_features()) ||
      input.rows < static_cast<std::size_t>(std::max(n, 0)))
    throw Error("layer \"" + name() + "\": forward_half input [" + std::to_string(input.rows) +
                ", " + std::to_string(input.cols) + "] " +
                (input.is_half() ? precision_name(input.format) : "fp32") + " for " +
                std::to_string(n) + " rows of " + std::to_string(in_features()) + " " +
                precision_name(format) + " features");
  store_->compute_operand(weight_);
  begin_forward_rows(n);
  half_x_ = input.first_rows(static_cast<std::size_t>(n));
  forward_from(half_x_, n);
}

void Linear::forward_from(const kernels::GemmOperand& x, int n) {
  const kernels::GemmOperand w = store_->compute_operand(weight_);  // [out, in]
  const kernels::ConstVector b = bias_vector();                     // [out]
  if (half_output_) {
    const Matrix z = as_matrix(gemm_out_, n, out_features());  // [n, out] fp32, transient
    kernels::gemm(false, true, x, w, 0.0f, z);
    const std::size_t words = static_cast<std::size_t>(n) * out_features();
    kernels::bias_activation_forward_half(store_->autocast().mode, z, b, activation_,
                                          kernels::HalfVector(z16_.data(), z16_.size() ? words : 0),
                                          kernels::HalfVector(y16_.data(), words));
    return;
  }
  const Matrix y = output_rows(n);  // [n, out]
  // z [n, out]: the pre-activation, kept apart from y only where backward needs it (GELU).
  const Matrix z = pre_activation_.size() > 0 ? as_matrix(pre_activation_, n, out_features()) : y;
  kernels::gemm(false, true, x, w, 0.0f, z);
  // Row-parallel: each rank holds a partial sum over its slice of in; the bias goes on once.
  if (split_ == Split::row && !defer_tp_) tp_.comm->all_reduce(z.data(), z.size(), ReduceOp::sum);
  if (activation_ == kernels::Activation::none) {
    if (bias_ && !(defer_tp_ && split_ == Split::row && tp_.rank() != 0)) kernels::bias_add(y, b);
  } else {
    kernels::bias_activation_forward(z, b, activation_, y);
  }
  round_in_place(store_->autocast(), y);
}

void Linear::backward(ConstMatrix output_grad, int n) {
  // [n, in] as forward's GEMM read it
  const kernels::GemmOperand x = half_input_ ? half_x_ : x16_.last();
  ConstMatrix dz = begin_backward(output_grad, n);  // [n, out]: dy, or dy * f'(z)
  if (half_output_) {
    // dz16 = dy * f'(z16 or y16), and db from the fp32 dz, in one pass.
    const std::size_t words = static_cast<std::size_t>(n) * out_features();
    const kernels::HalfView& saved16 = kernels::keeps_pre_activation(activation_) ? z16_ : y16_;
    kernels::bias_activation_backward_half(
        store_->autocast().mode, kernels::ConstHalfVector(saved16.data(), words), dz, activation_,
        dz16_.half_words(words),
        bias_ ? store_->grad_vector(*bias_) : kernels::Vector(db_discard_));
    backward_gemms(dz16_.written(n, out_features()), x, n);
    return;
  }
  if (activation_ == kernels::Activation::none) {
    // db[out] += sum over rows of dy
    if (bias_) kernels::column_sum_accumulate(dz, store_->grad_vector(*bias_));
  } else {
    const Matrix dzm = as_matrix(dz_, n, out_features());
    const ConstMatrix saved = kernels::keeps_pre_activation(activation_)
                                  ? as_matrix(pre_activation_, n, out_features())
                                  : kernels::first_rows(output(), n);
    kernels::bias_activation_backward(
        saved, dz, activation_, dzm,
        bias_ ? store_->grad_vector(*bias_) : kernels::Vector(db_discard_));
    dz = dzm;
  }
  backward_gemms(dz16_.round(dz), x, n);
}

void Linear::backward_gemms(const kernels::GemmOperand& dz_op, const kernels::GemmOperand& x,
                            int n) {
  // dW[out, in] += dz^T[out, n] x[n, in]
  kernels::gemm(true, false, dz_op, x, 1.0f, store_->grad_matrix(weight_));
  if (!input_grad_needed()) return;
  // dx[n, in] = dz[n, out] W[out, in]
  const Matrix dx = input_grad_rows(n);
  kernels::gemm(false, false, dz_op, store_->compute_operand(weight_), 0.0f, dx);
  // Column-parallel: every rank's output slice depends on the whole input.
  if (split_ == Split::column && !defer_tp_)
    tp_.comm->all_reduce(dx.data(), dx.size(), ReduceOp::sum);
  round_in_place(store_->autocast(), dx);
}

void Linear::recompute_input_copy() {
  if (!half_input_) x16_.round(saved_input());  // a 16-bit input is its producer's to redo
}

void Linear::allow_recompute_activation() {
  TRELLIS_REQUIRE(kernels::keeps_pre_activation(activation_),
                  "linear \"" + name() + "\": only a fused GELU is recomputed");
  minus_zero_ =
      FloatView("trellis::nn::" + name() + ".minus_zero", static_cast<std::size_t>(out_features()));
  kernels::fill(minus_zero_, -0.0f);
}

void Linear::recompute_activation(int n) {
  TRELLIS_REQUIRE(minus_zero_.size() > 0 && n <= capacity(), "linear \"" + name() +
                                                                 "\": recompute_activation without "
                                                                 "allow_recompute_activation()");
  if (half_output_) {
    const std::size_t words = static_cast<std::size_t>(n) * out_features();
    kernels::activation_forward_half(store_->autocast().mode,
                                     kernels::ConstHalfVector(z16_.data(), words), activation_,
                                     kernels::HalfVector(y16_.data(), words));
    return;
  }
  // The epilogue again on z, which already holds its bias: adding -0.0 leaves every z as it is.
  const Matrix y = output_rows(n);
  kernels::bias_activation_forward(as_matrix(pre_activation_, n, out_features()), minus_zero_,
                                   activation_, y);
  round_in_place(store_->autocast(), y);
}

kernels::GemmOperand Linear::output_half() const {
  TRELLIS_REQUIRE(half_output_, "linear \"" + name() + "\": its output is fp32 (output())");
  return kernels::GemmOperand::half(y16_.data(), store_->autocast().mode,
                                    static_cast<std::size_t>(capacity()),
                                    static_cast<std::size_t>(out_features()));
}

kernels::ConstVector Linear::bias_vector() const {
  return bias_ ? store_->param_vector(*bias_) : kernels::ConstVector(zero_bias_);
}

std::int64_t Linear::flops_per_sample() const {
  return 6 * static_cast<std::int64_t>(in_features()) * out_features();
}

}  // namespace trellis::nn
