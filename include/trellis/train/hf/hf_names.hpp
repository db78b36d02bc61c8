// Where each parameter of a Trellis decoder (nn/gpt.hpp) lives in a Hugging Face model: the
// transformers tensors it is made of and the rule between them. d = d_model, V = vocab,
// T = seq_len, f = d_ff, hd = d / n_head, H = n_head, K = n_kv_head.
//
// GPT2LMHeadModel (prefix "transformer."; GPT-2's Conv1D stores weights TRANSPOSED, [in, out]):
//   wte.weight [V, d]               transformer.wte.weight [V, d]            copy
//   wpe.weight [T, d]               transformer.wpe.weight [T, d]            copy
//   h.i.ln_{1,2}.{weight,bias} [d]  transformer.h.i.ln_{1,2}.{weight,bias}  copy
//   h.i.attn.c_attn.weight [3d, d]  transformer.h.i.attn.c_attn.weight [d, 3d]  transpose
//     (both order the output columns [q heads | k heads | v heads]: QkvLayout's multi-head)
//   h.i.attn.c_proj.weight [d, d]   ...attn.c_proj.weight [d, d]            transpose
//   h.i.mlp.c_fc.weight [f, d]      ...mlp.c_fc.weight [d, f]               transpose
//   h.i.mlp.c_proj.weight [d, f]    ...mlp.c_proj.weight [f, d]             transpose
//   every bias                      the same name                            copy
//   ln_f.{weight,bias} [d]          transformer.ln_f.{weight,bias}          copy
//   (the head is tied to wte: save_pretrained writes no lm_head.weight)
//
// LlamaForCausalLM (torch nn.Linear weights, [out, in] as Trellis'):
//   wte.weight [V, d]               model.embed_tokens.weight                copy
//   h.i.ln_1.weight [d]             model.layers.i.input_layernorm.weight    copy
//   h.i.attn.c_attn.weight [(H + 2K) hd, d]   rows by kernels::QkvLayout from
//       model.layers.i.self_attn.{q_proj [H hd, d], k_proj [K hd, d], v_proj [K hd, d]}
//       (K = H: [q | k | v]; K < H: per kv group j [q_{jg} .. q_{jg+g-1} | k_j | v_j]);
//       rows within a head are not permuted: Trellis' RoPE is transformers' rotate_half
//   h.i.attn.c_attn.bias            the same rows of {q,k,v}_proj.bias (attention_bias)
//   h.i.attn.c_proj.{weight,bias}   model.layers.i.self_attn.o_proj          copy
//   h.i.ln_2.weight                 model.layers.i.post_attention_layernorm  copy
//   h.i.mlp.c_fc.weight [2f, d]     rows [gate_proj [f, d]; up_proj [f, d]]  (mlp.*; biases too)
//   h.i.mlp.c_proj.{weight,bias}    model.layers.i.mlp.down_proj             copy
//   ln_f.weight                     model.norm.weight                        copy
//   lm_head.weight [V, d]           lm_head.weight (absent when tied)        copy
#pragma once

#include "trellis/core/shape.hpp"
#include "trellis/kernels/attention/qkv_layout.hpp"
#include "trellis/nn/gpt.hpp"
#include "trellis/train/hf/hf_config.hpp"

#include <string>
#include <vector>

namespace trellis {

enum class HfRule {
  copy,        // one part of the same shape
  transpose,   // one part [cols, rows] of a Trellis [rows, cols]
  stack_rows,  // the parts' rows one after another (SwiGLU's [gate; up])
  qkv_rows     // q, k, v parts placed by rows as `qkv` says (weights and biases)
};

struct HfPart {
  std::string name;  // transformers' name, with its prefix ("transformer.", "model.")
  Shape shape;
};

struct HfMapping {
  std::string param;  // the Trellis parameter
  Shape shape;        // its logical shape
  HfRule rule = HfRule::copy;
  std::vector<HfPart> parts;
  kernels::QkvLayout qkv;  // qkv_rows only
};

// Every parameter of the decoder `spec` (all of it: one rank, every stage) with its
// transformers tensors, in Trellis' registration order. `arch` as hf_arch_for(spec) gives.
std::vector<HfMapping> hf_mappings(const nn::GptSpec& spec, HfArch arch);

// The prefix of the base model's names ("transformer." | "model."): a folder saved from
// GPT2Model or LlamaModel (no LM head) has every name without it.
const char* hf_base_prefix(HfArch arch);

// The parts of one Trellis value [numel(m.shape)], row-major, in m.parts' order and shapes.
std::vector<std::vector<float>> split_to_hf(const HfMapping& m, const std::vector<float>& value);
// The Trellis value from its parts (each [numel(part.shape)]); the inverse of split_to_hf.
std::vector<float> join_from_hf(const HfMapping& m, const std::vector<std::vector<float>>& parts);

}  // namespace trellis
