#include "trellis/nn/transformer.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/rng.hpp"
#include "trellis/kernels/vector_ops.hpp"

#include <algorithm>
#include <string>

namespace trellis::nn {

namespace {

// Rows per chunk of an int8 MLP's fused forward: 256 rows of 4 * 128 fp32 pre-activations are
// 512 KiB, inside a core's L2.
constexpr int kInt8ChunkRows = 256;

int checked_dropout_d(const std::string& name, int d_model, float dropout) {
  if (!(dropout >= 0.0f && dropout < 1.0f)) {
    throw ConfigError("\"" + name + "\": dropout must be in [0, 1), got " +
                      std::to_string(dropout));
  }
  return d_model;
}

// out = a + b over rows [0, n), one pass.
void add_rows(ConstMatrix a, ConstMatrix b, Matrix out) {
  kernels::add(kernels::flat(a), kernels::flat(b), kernels::flat(out));
}

}  // namespace

FeedForward::FeedForward(ParameterStore& store, const std::string& name, int d_model,
                         int capacity_rows, float dropout, const TransformerInit& init,
                         TensorParallel tp)
    : Layer(name, checked_dropout_d(name, d_model, dropout), d_model, capacity_rows),
      c_fc_(store, name + ".c_fc", d_model, 4 * d_model, capacity_rows, InitSpec::normal(init.std),
            InitSpec::zeros(), Split::column, tp),
      c_proj_(store, name + ".c_proj", 4 * d_model, d_model, capacity_rows,
              InitSpec::normal(init.proj_std), InitSpec::zeros(), Split::row, tp),
      p_(dropout),
      stream_(stream_from_name(name + ".dropout")) {
  c_fc_.fuse_activation(kernels::Activation::gelu);  // c_fc + GELU in one layer
  // dx is c_fc's dx, and without dropout y is c_proj's y: no copies per call.
  share_input_grad_of(c_fc_);
  if (dropout == 0.0f) share_output_of(c_proj_);
  if (dropout > 0.0f) {
    dz_ = FloatView("trellis::nn::" + name + ".dz",
                    static_cast<std::size_t>(capacity_rows) * static_cast<std::size_t>(d_model));
  }
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
  c_proj_.forward(c_fc_.output(), n, ctx);
  const ConstMatrix z = kernels::first_rows(c_proj_.output(), n);
  if (dropout_active_) {
    kernels::dropout_apply(z, output_rows(n), mask_);
  } else if (p_ > 0.0f) {  // evaluation: dropout is the identity, but output() is its own buffer
    kernels::copy(kernels::flat(z), kernels::flat(output_rows(n)));
  }
}

void FeedForward::forward_int8(int n, const StepContext& ctx, ConstMatrix residual, Matrix out) {
  TRELLIS_REQUIRE(!ctx.training && c_fc_.int8() != nullptr && c_proj_.int8() != nullptr,
                  "mlp \"" + name() + "\": the fused int8 forward is for int8 inference");
  dropout_active_ = false;
  kernels::Int8Linear& fc = *c_fc_.int8();
  const int hidden = fc.out_features();
  // Row chunks whose fp32 pre-activation stays in L2, each through GELU into c_proj's bytes.
  const auto in_bytes = c_fc_.quantized_input();
  const auto out_bytes = c_proj_.quantized_input();
  for (int r0 = 0; r0 < n; r0 += kInt8ChunkRows) {
    const int rows = std::min(kInt8ChunkRows, n - r0);
    const Matrix z = as_matrix(int8_hidden_, rows, hidden);
    fc.forward(
        kernels::ConstByteVector(in_bytes.data() + static_cast<std::size_t>(r0) * fc.in_features(),
                                 static_cast<std::size_t>(rows) * fc.in_features()),
        rows, z);
    kernels::gelu_quantize(
        kernels::flat(z), c_proj_.int8()->input(),
        kernels::ByteVector(out_bytes.data() + static_cast<std::size_t>(r0) * hidden,
                            static_cast<std::size_t>(rows) * hidden));
  }
  c_proj_.int8()->forward(c_proj_.quantized_input(), n, out, residual);
}

void FeedForward::allocate_int8_hidden() {
  int8_hidden_ = FloatView("trellis::nn::" + name() + ".int8_hidden",
                           static_cast<std::size_t>(kInt8ChunkRows) * c_fc_.out_features());
}

void FeedForward::backward(ConstMatrix output_grad, int n) {
  const ConstMatrix dy = begin_backward(output_grad, n);
  ConstMatrix dz = dy;
  if (dropout_active_) {
    const Matrix dzm = as_matrix(dz_, n, out_features());
    kernels::dropout_apply(dy, dzm, mask_);
    dz = dzm;
  }
  c_proj_.backward(dz, n);
  c_fc_.backward(c_proj_.input_grad(), n);  // writes this layer's input_grad() (shared)
}

std::int64_t FeedForward::flops_per_sample() const {
  return c_fc_.flops_per_sample() + c_proj_.flops_per_sample();
}

Block::Block(ParameterStore& store, const std::string& name, int d_model, int n_head, int seq_len,
             int capacity_rows, float dropout, const TransformerInit& init, TensorParallel tp)
    : Layer(name, d_model, d_model, capacity_rows),
      ln_1_(store, name + ".ln_1", d_model, capacity_rows),
      attn_(store, name + ".attn", d_model, n_head, seq_len, capacity_rows, dropout, init, tp),
      ln_2_(store, name + ".ln_2", d_model, capacity_rows),
      mlp_(store, name + ".mlp", d_model, capacity_rows, dropout, init, tp) {
  const auto size = static_cast<std::size_t>(capacity_rows) * static_cast<std::size_t>(d_model);
  h_ = FloatView("trellis::nn::" + name + ".h", size);
  dh_ = FloatView("trellis::nn::" + name + ".dh", size);
}

void Block::fuse_int8() {
  Linear& attn_proj = attn_.c_proj();
  Linear& fc = mlp_.c_fc();
  Linear& mlp_proj = mlp_.c_proj();
  if (attn_.c_attn().int8() == nullptr || attn_proj.int8() == nullptr || fc.int8() == nullptr ||
      mlp_proj.int8() == nullptr)
    return;
  attn_proj.int8()->set_residual(true);
  fc.int8()->set_activation(kernels::Activation::none);  // GELU: FeedForward::forward_int8
  mlp_.allocate_int8_hidden();
  mlp_proj.int8()->set_residual(true);
  int8_fused_ = true;
}

void Block::forward(ConstMatrix input, int n, const StepContext& ctx) {
  const ConstMatrix x = begin_forward(input, n);
  const int d = in_features();
  if (int8_fused_) {
    const Matrix h = as_matrix(h_, n, d), y = output_rows(n);
    Linear& c_attn = attn_.c_attn();
    Linear& c_fc = mlp_.c_fc();
    // Whole sequences at a time, about 256 rows, so each step's output is still in L2 when
    // the next reads it; the parts' own buffers are reused from row 0 for every chunk.
    const int T = attn_.seq_len();
    const int chunk = std::max(1, kInt8ChunkRows / T) * T;
    auto rows_of = [&](auto m, int r0, int rows) {
      return decltype(m)(m.data() + static_cast<std::size_t>(r0) * m.extent(1),
                         static_cast<std::size_t>(rows), m.extent(1));
    };
    for (int r0 = 0; r0 < n; r0 += chunk) {
      const int rows = std::min(chunk, n - r0);
      const ConstMatrix xc = rows_of(x, r0, rows);
      const Matrix hc = rows_of(h, r0, rows);
      ln_1_.forward_quantized(xc, rows, c_attn.int8()->input(), c_attn.quantized_input());
      attn_.forward_int8(rows, ctx, xc, hc);
      ln_2_.forward_quantized(hc, rows, c_fc.int8()->input(), c_fc.quantized_input());
      mlp_.forward_int8(rows, ctx, hc, rows_of(y, r0, rows));
    }
    return;
  }
  ln_1_.forward(x, n, ctx);
  attn_.forward(ln_1_.output(), n, ctx);
  const Matrix h = as_matrix(h_, n, d);
  add_rows(x, kernels::first_rows(attn_.output(), n), h);
  ln_2_.forward(h, n, ctx);
  mlp_.forward(ln_2_.output(), n, ctx);
  add_rows(h, kernels::first_rows(mlp_.output(), n), output_rows(n));
}

void Block::backward(ConstMatrix output_grad, int n) {
  const ConstMatrix dy = begin_backward(output_grad, n);
  const int d = in_features();
  mlp_.backward(dy, n);
  ln_2_.backward(mlp_.input_grad(), n);
  const Matrix dh = as_matrix(dh_, n, d);
  add_rows(dy, kernels::first_rows(ln_2_.input_grad(), n), dh);
  attn_.backward(dh, n);
  ln_1_.backward(attn_.input_grad(), n);
  add_rows(dh, kernels::first_rows(ln_1_.input_grad(), n), input_grad_rows(n));
}

std::int64_t Block::flops_per_sample() const {
  return attn_.flops_per_sample() + mlp_.flops_per_sample();
}

}  // namespace trellis::nn
