#include "trellis/int8/transformer_block.hpp"

#include "trellis/core/error.hpp"
#include "trellis/kernels/attention/rope.hpp"
#include "trellis/kernels/swiglu.hpp"
#include "trellis/kernels/vector_ops.hpp"

#include <algorithm>

namespace trellis::int8 {

namespace {

// Rows per chunk of the chained forward: 256 rows of 4 * 128 fp32 pre-activations are 512 KiB,
// inside a core's L2.
constexpr int kChunkRows = 256;

FloatView rows_buffer(const std::string& block, const char* what, int rows, int width) {
  return FloatView("trellis::int8::" + block + "." + what,
                   static_cast<std::size_t>(rows) * static_cast<std::size_t>(width));
}

// Rows [r0, r0 + rows) of a row-major matrix.
template <class M>
M rows_of(const M& m, int r0, int rows) {
  return M(m.data() + static_cast<std::size_t>(r0) * m.extent(1), static_cast<std::size_t>(rows),
           m.extent(1));
}

}  // namespace

Int8TransformerBlock::Projection Int8TransformerBlock::projection(
    const nn::Linear& linear, Int8LayerTable& layers, kernels::Activation activation,
    const Int8Options& options) const {
  if (linear.split() != nn::Split::none)
    throw Error("layer \"" + linear.name() +
                "\": a layer split over tensor-parallel ranks has no int8 form");
  Projection p;
  p.kernel =
      make_int8_linear(layers.take(linear.name()), linear.in_features(), linear.out_features(),
                       linear.bias_vector(), activation, options.backend);
  p.input = kernels::ByteView(
      "trellis::int8::" + linear.name() + ".xq",
      static_cast<std::size_t>(capacity()) * static_cast<std::size_t>(linear.in_features()));
  return p;
}

Int8TransformerBlock::Int8TransformerBlock(nn::Block& block, const nn::ParameterStore& store,
                                           Int8LayerTable& layers, const Int8Options& options)
    : Layer(block.name(), block.in_features(), block.out_features(), block.capacity(),
            InferenceOnly{}),
      block_(block),
      store_(store),
      chained_(options.fuse),
      d_(block.in_features()),
      shape_{block.attn().n_head(), block.attn().seq_len(), block.attn().n_kv_head()} {
  const auto none = kernels::Activation::none;
  const nn::FeedForward& mlp = block.mlp();
  c_attn_ = projection(block.attn().c_attn(), layers, none, options);
  attn_proj_ = projection(block.attn().c_proj(), layers, none, options);
  // Chained, c_fc writes pre-activations and the GELU runs with the quantization after it.
  c_fc_ = projection(mlp.c_fc(), layers, chained_ ? none : mlp.c_fc().activation(), options);
  mlp_proj_ = projection(mlp.c_proj(), layers, none, options);
  if (chained_) {
    attn_proj_.kernel->set_residual(true);
    mlp_proj_.kernel->set_residual(true);
  }
  const int cap = capacity(), hidden = mlp.c_fc().out_features();
  qkv_ = rows_buffer(name(), "qkv", cap, static_cast<int>(block.attn().layout().width()));
  yr_ = rows_buffer(name(), "yr", cap, d_);
  lse_ = rows_buffer(name(), "lse", cap, shape_.n_head);
  h_ = rows_buffer(name(), "h", cap, d_);
  hidden_ = rows_buffer(name(), "hidden", chained_ ? std::min(kChunkRows, cap) : cap, hidden);
  if (!chained_) proj_out_ = rows_buffer(name(), "proj_out", cap, d_);
  if (mlp.kind() == nn::MlpKind::swiglu)
    gated_ = rows_buffer(name(), "gated", chained_ ? std::min(kChunkRows, cap) : cap,
                         mlp.c_proj().in_features());
}

void Int8TransformerBlock::forward(ConstMatrix input, int n, const nn::StepContext& ctx) {
  TRELLIS_REQUIRE(!ctx.training, "block \"" + name() + "\": int8 inference only");
  const ConstMatrix x = begin_forward(input, n);
  TRELLIS_REQUIRE(n % shape_.seq_len == 0, "block \"" + name() + "\": " + std::to_string(n) +
                                               " rows are no whole sequences of " +
                                               std::to_string(shape_.seq_len));
  if (chained_)
    forward_chained(x, n);
  else
    forward_layer_by_layer(x, n, ctx);
}

void Int8TransformerBlock::layernorm_into(const nn::LayerNorm& ln, ConstMatrix x, int rows,
                                          const Projection& to) {
  ln.forward_quantized(x, rows, to.kernel->input(), to.input);
}

ConstMatrix Int8TransformerBlock::attend(int rows) {
  const nn::CausalSelfAttention& attn = block_.attn();
  const Matrix qkv = as_matrix(qkv_, rows, static_cast<int>(attn.layout().width()));
  c_attn_.kernel->forward(c_attn_.input, rows, qkv);
  if (const nn::RotaryTables* rope = attn.rope())
    kernels::rope_forward(qkv, attn.layout(), shape_.seq_len, 0, rope->cos, rope->sin);
  const Matrix yr = as_matrix(yr_, rows, d_);
  kernels::flash_attention_forward(
      qkv, shape_, yr, kernels::Vector(lse_.data(), static_cast<std::size_t>(rows) * shape_.n_head),
      kernels::DropoutMask{});
  return yr;
}

void Int8TransformerBlock::forward_chained(ConstMatrix x, int n) {
  const Matrix h = as_matrix(h_, n, d_), y = output_rows(n);
  const int hidden = c_fc_.kernel->out_features();
  const int gated_width = mlp_proj_.kernel->in_features();  // hidden, or hidden / 2 (SwiGLU)
  const int T = shape_.seq_len;
  const int chunk = std::max(1, kChunkRows / T) * T;  // whole sequences
  // The buffers (qkv, yr, hidden, the quantized inputs) are reused from row 0 for each chunk.
  for (int r0 = 0; r0 < n; r0 += chunk) {
    const int rows = std::min(chunk, n - r0);
    const ConstMatrix xc = rows_of(x, r0, rows);
    const Matrix hc = rows_of(h, r0, rows);
    // h = x + attn.c_proj(q(attention(...))), the add in c_proj's epilogue.
    layernorm_into(block_.ln_1(), xc, rows, c_attn_);
    kernels::quantize(kernels::flat(attend(rows)), attn_proj_.kernel->input(), attn_proj_.input);
    attn_proj_.kernel->forward(attn_proj_.input, rows, hc, xc);
    // y = h + mlp.c_proj(q(f(mlp.c_fc(q(ln_2(h)))))), c_fc in L2-sized pieces.
    layernorm_into(block_.ln_2(), hc, rows, c_fc_);
    for (int s0 = 0; s0 < rows; s0 += kChunkRows) {
      const int sub = std::min(kChunkRows, rows - s0);
      const Matrix z = as_matrix(hidden_, sub, hidden);
      c_fc_.kernel->forward(
          kernels::ConstByteVector(c_fc_.input.data() + static_cast<std::size_t>(s0) * d_,
                                   static_cast<std::size_t>(sub) * d_),
          sub, z);
      quantize_hidden(
          z, sub,
          kernels::ByteVector(mlp_proj_.input.data() + static_cast<std::size_t>(s0) * gated_width,
                              static_cast<std::size_t>(sub) * gated_width));
    }
    mlp_proj_.kernel->forward(mlp_proj_.input, rows, rows_of(y, r0, rows), hc);
  }
}

void Int8TransformerBlock::forward_layer_by_layer(ConstMatrix x, int n,
                                                  const nn::StepContext& ctx) {
  nn::LayerNorm& ln_1 = block_.ln_1();
  nn::LayerNorm& ln_2 = block_.ln_2();
  const Matrix h = as_matrix(h_, n, d_), out = as_matrix(proj_out_, n, d_);
  ln_1.forward(x, n, ctx);
  kernels::quantize(kernels::flat(kernels::first_rows(ln_1.output(), n)), c_attn_.kernel->input(),
                    c_attn_.input);
  kernels::quantize(kernels::flat(attend(n)), attn_proj_.kernel->input(), attn_proj_.input);
  attn_proj_.kernel->forward(attn_proj_.input, n, out);
  kernels::add(kernels::flat(x), kernels::flat(out), kernels::flat(h));
  ln_2.forward(h, n, ctx);
  kernels::quantize(kernels::flat(kernels::first_rows(ln_2.output(), n)), c_fc_.kernel->input(),
                    c_fc_.input);
  const Matrix g = as_matrix(hidden_, n, c_fc_.kernel->out_features());
  c_fc_.kernel->forward(c_fc_.input, n, g);  // GELU: in its epilogue
  ConstMatrix gated = g;
  if (block_.mlp().kind() == nn::MlpKind::swiglu) {
    const Matrix swiglu = as_matrix(gated_, n, mlp_proj_.kernel->in_features());
    kernels::swiglu_forward(g, swiglu);
    gated = swiglu;
  }
  kernels::quantize(kernels::flat(gated), mlp_proj_.kernel->input(), mlp_proj_.input);
  mlp_proj_.kernel->forward(mlp_proj_.input, n, out);
  kernels::add(kernels::flat(h), kernels::flat(out), kernels::flat(output_rows(n)));
}

void Int8TransformerBlock::quantize_hidden(ConstMatrix z, int rows, kernels::ByteVector out) {
  if (block_.mlp().kind() == nn::MlpKind::swiglu) {
    const Matrix gated = as_matrix(gated_, rows, mlp_proj_.kernel->in_features());
    kernels::swiglu_forward(kernels::first_rows(z, rows), gated);
    kernels::quantize(kernels::flat(gated), mlp_proj_.kernel->input(), out);
    return;
  }
  kernels::activation_quantize(kernels::flat(kernels::first_rows(z, rows)),
                               block_.mlp().c_fc().activation(), mlp_proj_.kernel->input(), out);
}

void Int8TransformerBlock::backward(ConstMatrix, int) {
  throw Error("layer \"" + name() + "\": an int8 layer is for inference only");
}

}  // namespace trellis::int8
