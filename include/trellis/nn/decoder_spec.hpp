// The shape of a decoder block in the GPT-2 / Llama family (nn/gpt.hpp builds the model from
// it): what the model.* keys choose beyond the sizes.
//
//   GPT-2:  learned positions, LayerNorm, GELU MLP of 4 d, multi-head attention, biases
//   Llama:  RoPE, RMSNorm, SwiGLU MLP of its own width, grouped-query attention, no biases
#pragma once

#include "trellis/core/kokkos_types.hpp"
#include "trellis/kernels/attention/rope.hpp"
#include "trellis/nn/init.hpp"
#include "trellis/nn/layernorm.hpp"

#include <optional>
#include <string>

namespace trellis::nn {

// gelu: exact (erf) GELU; gelu_tanh: its tanh approximation (GPT-2's own "gelu_new").
enum class MlpKind { gelu, gelu_tanh, swiglu };

// "gelu" | "gelu_tanh" | "swiglu" (ConfigError naming model.mlp otherwise), and back.
MlpKind parse_mlp_kind(const std::string& name);
const char* mlp_kind_name(MlpKind kind);

// The rotary tables every attention layer of a model reads (kernels/rope.hpp), built once:
// cos, sin [positions * head_dim / 2].
struct RotaryTables {
  FloatView cos, sin;
  int head_dim = 0, positions = 0;

  RotaryTables() = default;
  RotaryTables(const kernels::RopeSpec& spec, int head_dim, int positions);
};

struct BlockSpec {
  int d_model = 0;
  int n_head = 0;
  int n_kv_head = 0;  // key/value heads (grouped-query attention); 0: n_head
  int seq_len = 0;
  int d_ff = 0;  // the MLP's hidden width; 0: 4 d_model
  MlpKind mlp = MlpKind::gelu;
  NormKind norm = NormKind::layernorm;
  float norm_eps = 1e-5f;
  bool bias = true;  // biases on the attention and MLP Linears
  float dropout = 0.0f;
  // Selective recomputation (nn/block_stack.hpp): backward reruns the norms and the MLP's
  // activation instead of keeping their outputs.
  bool recompute_cheap = false;
  const RotaryTables* rope = nullptr;  // rotary positions: the model's tables; nullptr: none

  int kv_heads() const { return n_kv_head > 0 ? n_kv_head : n_head; }
  // The Linears' bias: zeros as GPT-2's, or none.
  std::optional<InitSpec> linear_bias_init() const {
    return bias ? std::optional<InitSpec>(InitSpec::zeros()) : std::nullopt;
  }
  int ff_width() const { return d_ff > 0 ? d_ff : 4 * d_model; }

  // GPT-2's block (the defaults above) of the given sizes.
  static BlockSpec gpt2(int d_model, int n_head, int seq_len, float dropout) {
    BlockSpec s;
    s.d_model = d_model, s.n_head = n_head, s.seq_len = seq_len, s.dropout = dropout;
    return s;
  }
};

}  // namespace trellis::nn
