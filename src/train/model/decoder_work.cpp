// Per sequence of T tokens, this tp rank's share. The GEMMs and collectives are the layers' own
// (nn/transformer.hpp, nn/attention.hpp, nn/tied_head.hpp, nn/embedding.hpp,
// nn/softmax_xent.hpp); the element-wise floats count each pass's reads and writes:
//   norm          forward x -> y (2), backward dy, x -> dx added into the residual grad (4)
//   residual add  forward 3, backward 3
//   rope          q and k read and written, forward and backward (4 per element)
//   GELU          forward z -> y, z kept (3), backward dy, z -> dz (3)
//   SwiGLU        forward gate, up -> h (3), backward dy, gate, up -> dgate, dup (5)
//   softmax + cross-entropy over the logits: max and sum passes, the probabilities written,
//                 read back as the gradient (4)
// With sequence parallelism the norms and residual adds run on T / tp rows.
#include "decoder_work.hpp"

namespace trellis {

ModelWork decoder_work(const nn::GptSpec& spec, int tp, bool sequence_parallel) {
  const nn::BlockSpec block = nn::gpt_block_spec(spec, nullptr);
  const double T = spec.seq_len, d = spec.d_model, V = spec.vocab, p = tp;
  const double head_dim = d / spec.n_head;
  const double qkv = (spec.n_head + 2.0 * block.kv_heads()) * head_dim;
  const double f = block.ff_width();
  const bool swiglu = spec.mlp == nn::MlpKind::swiglu;
  const double row_share = sequence_parallel && tp > 1 ? 1 / p : 1;
  ModelWork work;
  work.params = static_cast<double>(nn::gpt_num_params(spec));

  UnitWork embed;  // token (and position) lookup, backward scatter-add into the table
  embed.elementwise_floats = 4 * T * d;
  embed.params = V * d / p + (spec.positions == nn::Positions::learned ? T * d : 0);
  embed.output_floats = T * d;
  embed.kernels = 6;
  if (tp > 1) embed.tp_collectives.push_back({TpCollective::all_reduce, T * d, 1, 1});
  work.units.push_back(embed);

  for (int i = 0; i < spec.n_layer; ++i) {
    UnitWork u;
    u.block = true;
    u.params = static_cast<double>(nn::gpt_block_params(spec)) / p;
    u.output_floats = T * d;
    // 4 Linears (3 GEMMs each, a bias or epilogue pass), 2 norms, attention, rope, MLP
    // activation, residual adds and copies, forward and backward: about 40.
    u.kernels = 40;
    u.gemms.push_back({T, qkv / p, d});                   // c_attn (column)
    u.gemms.push_back({T, d, d / p});                     // attn c_proj (row)
    u.gemms.push_back({T, (swiglu ? 2 : 1) * f / p, d});  // c_fc (column)
    u.gemms.push_back({T, d, f / p});                     // mlp c_proj (row)
    u.attention_flops = 12 * T * T * d / p;               // QK^T and AV, forward + backward
    u.attention_head_dim = head_dim;
    const double norms_and_adds = (2 * 6 + 2 * 6) * T * d * row_share;
    const double rotated = d + block.kv_heads() * head_dim;  // q and k
    const double rope = spec.positions == nn::Positions::rope ? 4 * T * rotated / p : 0;
    const double mlp = (swiglu ? 8 : 6) * T * f / p;
    u.elementwise_floats = norms_and_adds + rope + mlp;
    // Forward halves of those passes: what a full recomputation reruns.
    u.recompute_floats = (2 * 2 + 2 * 3) * T * d * row_share + rope / 2 + 3 * T * f / p;
    if (tp > 1) {
      if (sequence_parallel) {
        // nn/transformer_sequence.cpp: forward gathers each norm's output and reduce-scatters
        // the attention's and the MLP's partial sums; backward gathers their output gradients
        // and the norms' outputs again, reduce-scatters the input gradients, and sums each
        // norm parameter's gradient (weight, and LayerNorm's bias) over tp.
        u.tp_collectives.push_back({TpCollective::all_gather, T * d, 6, 2});
        u.tp_collectives.push_back({TpCollective::reduce_scatter, T * d, 4, 2});
        const int norm_params = spec.norm == nn::NormKind::layernorm ? 2 : 1;
        u.tp_collectives.push_back({TpCollective::all_reduce, 0, 2 * norm_params, 0, d});
      } else {
        // The attention's and the MLP's outputs in forward, their input gradients in backward.
        u.tp_collectives.push_back({TpCollective::all_reduce, T * d, 4, 2});
      }
    }
    work.units.push_back(u);
  }

  UnitWork head;  // ln_f, the head's GEMM over this rank's vocabulary slice, the loss
  head.gemms.push_back({T, V / p, d});
  head.kernels = 10;
  head.elementwise_floats = 6 * T * d + 4 * T * V / p;
  head.params = 2 * d + (spec.tied_head ? 0 : V * d / p);
  work.tied_table = spec.tied_head;
  work.tied_floats = V * d / p;
  if (tp > 1) {
    head.tp_collectives.push_back({TpCollective::all_reduce, T * d, 1, 0});  // the head's dx
    // The vocabulary-parallel loss (nn/softmax_xent.cpp): each row's max and min, its 2 sums.
    head.tp_collectives.push_back({TpCollective::all_reduce, T, 2, 2});
    head.tp_collectives.push_back({TpCollective::all_reduce, 2 * T, 1, 1});
    if (sequence_parallel) head.tp_collectives.push_back({TpCollective::all_gather, T * d, 2, 1});
  }
  work.units.push_back(head);
  return work;
}

}  // namespace trellis
