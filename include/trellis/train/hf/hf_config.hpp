// config.json of a Hugging Face model folder <-> the model.* keys of a Trellis decoder.
//
// Two classes of transformers hold a Trellis decoder (nn/gpt.hpp):
//
//   GPT2LMHeadModel (model_type "gpt2"): learned positions, LayerNorm, GELU MLP (n_inner wide,
//     4 d when null), multi-head attention, biases, head tied to wte.
//       n_embd = model.d_model, n_layer, n_head, n_positions (= n_ctx) = model.seq_len,
//       n_inner = model.d_ff, vocab_size = model.vocab, layer_norm_epsilon = model.norm_eps,
//       resid_pdrop = embd_pdrop = attn_pdrop = model.dropout,
//       activation_function "gelu": Trellis' GELU is the exact erf form; GPT-2's own
//       "gelu_new" (the tanh approximation, transformers' default) is not in Trellis yet.
//   LlamaForCausalLM (model_type "llama"): rotary positions (rotate_half), RMSNorm, SwiGLU,
//     grouped-query attention; biases and the tied head optional.
//       hidden_size = model.d_model, intermediate_size = model.d_ff, num_hidden_layers,
//       num_attention_heads, num_key_value_heads = model.n_kv_head, head_dim = d / heads,
//       max_position_embeddings = model.seq_len, rms_norm_eps = model.norm_eps, rope_theta,
//       rope_scaling {"rope_type": "llama3", factor, low_freq_factor, high_freq_factor,
//       original_max_position_embeddings} when model.rope_scaling_factor > 0 (else null),
//       attention_bias = mlp_bias = model.bias (Trellis has one flag for both),
//       tie_word_embeddings = model.tied_head, hidden_act "silu",
//       attention_dropout = model.dropout.
//     transformers 5 writes rope_theta and rope_scaling as one "rope_parameters" object;
//     both spellings are read, and both are written.
//
// Keys config.json leaves out take the class's default, as transformers does (GPT-2's
// activation_function default is gelu_new, so a GPT-2 config must name "gelu").
#pragma once

#include "trellis/core/precision.hpp"
#include "trellis/nn/gpt.hpp"
#include "trellis/train/model/model_config.hpp"

#include <string>
#include <vector>

namespace trellis {

enum class HfArch { gpt2, llama };

const char* hf_architecture(HfArch arch);  // "GPT2LMHeadModel" | "LlamaForCausalLM"
const char* hf_model_type(HfArch arch);    // "gpt2" | "llama"

// The class that holds the decoder `spec` (resolved, as nn::Gpt holds it) of model.type
// `type`: rotary positions make it Llama, learned ones GPT-2. ConfigError naming the model.*
// key and value that the chosen class cannot express (e.g. "model.norm = layernorm").
HfArch hf_arch_for(const nn::GptSpec& spec, ModelType type);

// config.json of `spec` as `arch` (checked by hf_arch_for), tensors stored as `dtype`.
std::string hf_config_json(const nn::GptSpec& spec, HfArch arch, Precision dtype);

// tokenizer_config.json for a tokenizer.json (its text): PreTrainedTokenizerFast, the context
// length, and its first special added token (<|endoftext|>) as the bos, eos and pad token.
std::string hf_tokenizer_config_json(const std::string& tokenizer_json, int seq_len);

// A config.json read into model.* values.
struct HfModelConfig {
  HfArch arch = HfArch::gpt2;
  ModelConfig model;               // type gpt or llama, every option explicit (no "auto")
  std::vector<std::string> notes;  // what was accepted but not carried over (for the log)
};

// Parses config.json text (`path` names it in messages) into `base`'s model.* values (the keys
// of other model types stay as they are there). InputError naming the file, the key
// and its value for JSON that is not an object, a model_type other than gpt2/llama, and
// every setting Trellis does not compute (e.g. activation_function = "gelu_new",
// rope_scaling.rope_type = "linear", head_dim != hidden_size / num_attention_heads).
HfModelConfig hf_model_config(const std::string& json_text, const std::string& path,
                              const ModelConfig& base = ModelConfig{});

}  // namespace trellis
