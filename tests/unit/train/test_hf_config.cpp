// config.json <-> model.* (train/hf/hf_config.hpp) and the tensor mapping (hf_names.hpp):
// what is read, what is refused by key and value, and the q/k/v and gate/up row placement.
#include "trellis/core/error.hpp"
#include "trellis/train/hf/hf_config.hpp"
#include "trellis/train/hf/hf_names.hpp"

#include "catch.hpp"
#include "unit/support/text_helpers.hpp"

#include <string>
#include <vector>

using namespace trellis;
using test::contains;
using test::message_of;

namespace {

std::string config_error(const std::string& json) {
  return message_of<InputError>([&] { hf_model_config(json, "dir/config.json"); }, "(no error)");
}

nn::GptSpec llama_spec() {
  nn::GptSpec s;
  s.n_layer = 2, s.n_head = 4, s.n_kv_head = 2, s.d_model = 32, s.d_ff = 48, s.seq_len = 16;
  s.vocab = 40, s.capacity = 1;
  s.positions = nn::Positions::rope, s.norm = nn::NormKind::rmsnorm, s.mlp = nn::MlpKind::swiglu;
  s.bias = false, s.tied_head = false, s.norm_eps = 1e-6f;
  s.rope.theta = 500000.0, s.rope.factor = 8.0, s.rope.original_context = 8;
  return s;
}

nn::GptSpec gpt2_spec() {
  nn::GptSpec s;
  s.n_layer = 2, s.n_head = 4, s.d_model = 32, s.seq_len = 16, s.vocab = 40, s.capacity = 1;
  return s;
}

}  // namespace

TEST_CASE("hf config: a Llama config.json gives every model.* key", "[hf]") {
  const HfModelConfig c = hf_model_config(R"({
    "model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64,
    "intermediate_size": 96, "num_hidden_layers": 3, "num_attention_heads": 8,
    "num_key_value_heads": 2, "head_dim": 8, "max_position_embeddings": 128,
    "rms_norm_eps": 1e-5, "vocab_size": 300, "tie_word_embeddings": true,
    "attention_bias": true, "mlp_bias": true,
    "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                        "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                        "original_max_position_embeddings": 64}})",
                                          "config.json");
  const ModelConfig& m = c.model;
  CHECK(c.arch == HfArch::llama);
  CHECK(m.type == ModelType::llama);
  CHECK((m.d_model == 64 && m.d_ff == 96 && m.n_layer == 3 && m.n_head == 8 && m.n_kv_head == 2));
  CHECK((m.seq_len == 128 && m.vocab == 300 && m.norm_eps == 1e-5f));
  CHECK((m.positions == "rope" && m.norm == "rmsnorm" && m.mlp == "swiglu"));
  CHECK((m.bias == "true" && m.tied_head == "true"));
  CHECK(
      (m.rope_theta == 500000.0 && m.rope_scaling_factor == 8.0 && m.rope_original_context == 64));
  // transformers 4's spelling: rope_theta and rope_scaling with "type".
  const HfModelConfig v4 = hf_model_config(
      R"({"model_type": "llama", "rope_theta": 1e6, "rope_scaling": {"type": "llama3",
          "factor": 2, "low_freq_factor": 1, "high_freq_factor": 4,
          "original_max_position_embeddings": 1024}})",
      "config.json");
  CHECK((v4.model.rope_theta == 1e6 && v4.model.rope_scaling_factor == 2.0));
  CHECK((v4.model.n_kv_head == 32 && v4.model.tied_head == "false"));  // Llama's defaults
}

TEST_CASE("hf config: what Trellis does not compute is refused by key and value", "[hf]") {
  std::string e = config_error(R"({"model_type": "mistral", "sliding_window": 4096})");
  CHECK(contains(e, "dir/config.json: model_type = \"mistral\""));
  CHECK(contains(e, "sliding-window"));
  e = config_error(R"({"model_type": "gpt2", "activation_function": "relu"})");
  CHECK(contains(e, "activation_function = \"relu\""));
  e = config_error(
      R"({"model_type": "llama", "rope_scaling": {"rope_type": "linear", "factor": 2}})");
  CHECK(contains(e, "rope_scaling.rope_type = \"linear\""));
  e = config_error(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 8,
                       "head_dim": 16})");
  CHECK(
      contains(e, "head_dim = 16: Trellis needs head_dim = hidden_size / num_attention_heads = 8"));
  e = config_error(R"({"model_type": "llama", "attention_bias": true})");
  CHECK(contains(e, "mlp_bias = "));
  e = config_error(R"({"model_type": "llama", "hidden_act": "gelu"})");
  CHECK(contains(e, "hidden_act = \"gelu\""));
  e = config_error(R"({"model_type": "llama", "num_hidden_layers": 2.5})");
  CHECK(contains(e, "num_hidden_layers = 2.5: expected an integer"));
  CHECK(contains(config_error("[1, 2]"), "dir/config.json: not a JSON object"));
  CHECK(contains(config_error("{"), "dir/config.json: not JSON"));
}

TEST_CASE("hf config: config.json written for a spec reads back as the same model.* keys", "[hf]") {
  const nn::GptSpec llama = llama_spec();
  const HfModelConfig back =
      hf_model_config(hf_config_json(llama, HfArch::llama, Precision::bf16), "x");
  CHECK(back.arch == HfArch::llama);
  CHECK((back.model.n_layer == 2 && back.model.n_head == 4 && back.model.n_kv_head == 2));
  CHECK((back.model.d_model == 32 && back.model.d_ff == 48 && back.model.seq_len == 16));
  CHECK((back.model.vocab == 40 && back.model.norm_eps == 1e-6f && back.model.bias == "false"));
  CHECK((back.model.rope_theta == 500000.0 && back.model.rope_scaling_factor == 8.0 &&
         back.model.rope_original_context == 8 && back.model.tied_head == "false"));
  CHECK(contains(hf_config_json(llama, HfArch::llama, Precision::bf16),
                 "\"torch_dtype\": \"bfloat16\""));

  const nn::GptSpec gpt2 = gpt2_spec();
  const std::string text = hf_config_json(gpt2, HfArch::gpt2, Precision::fp32);
  CHECK(contains(text, "\"activation_function\": \"gelu\""));
  CHECK(contains(text, "\"layer_norm_epsilon\": 1e-05"));
  const HfModelConfig g = hf_model_config(text, "x");
  CHECK((g.model.type == ModelType::gpt && g.model.d_ff == 128 && g.model.seq_len == 16));
  CHECK(g.model.mlp == "gelu");

  // GPT-2's tanh GELU: "gelu_new" both ways; transformers' default and its other spellings
  // read as the same function.
  nn::GptSpec tanh = gpt2_spec();
  tanh.mlp = nn::MlpKind::gelu_tanh;
  const std::string tanh_text = hf_config_json(tanh, HfArch::gpt2, Precision::fp32);
  CHECK(contains(tanh_text, "\"activation_function\": \"gelu_new\""));
  CHECK(hf_model_config(tanh_text, "x").model.mlp == "gelu_tanh");
  CHECK(hf_model_config(R"({"model_type": "gpt2"})", "x").model.mlp == "gelu_tanh");
  for (const char* spelling : {"gelu_pytorch_tanh", "gelu_fast"}) {
    CHECK(hf_model_config(
              std::string(R"({"model_type": "gpt2", "activation_function": ")") + spelling + "\"}",
              "x")
              .model.mlp == "gelu_tanh");
  }
}

TEST_CASE("hf config: options a transformers class cannot hold are named", "[hf]") {
  auto error = [](const nn::GptSpec& s, ModelType type) {
    return message_of<ConfigError>([&] { hf_arch_for(s, type); }, "(no error)");
  };
  CHECK(hf_arch_for(gpt2_spec(), ModelType::gpt) == HfArch::gpt2);
  CHECK(hf_arch_for(llama_spec(), ModelType::llama) == HfArch::llama);
  CHECK(hf_arch_for(llama_spec(), ModelType::gpt) == HfArch::llama);  // gpt with Llama's options
  nn::GptSpec s = gpt2_spec();
  s.positions = nn::Positions::rope;
  CHECK(contains(error(s, ModelType::gpt), "model.norm = layernorm"));
  s = gpt2_spec(), s.bias = false;
  CHECK(contains(error(s, ModelType::gpt), "model.bias = false"));
  s = gpt2_spec(), s.tied_head = false;
  CHECK(contains(error(s, ModelType::gpt), "model.tied_head = false"));
  s = gpt2_spec(), s.n_kv_head = 2;
  CHECK(contains(error(s, ModelType::gpt), "model.n_kv_head = 2"));
  s = gpt2_spec(), s.norm = nn::NormKind::rmsnorm;
  CHECK(contains(error(s, ModelType::gpt), "model.norm = rmsnorm"));
  s = gpt2_spec(), s.mlp = nn::MlpKind::swiglu;
  CHECK(contains(error(s, ModelType::gpt), "model.mlp = swiglu"));
  CHECK(contains(error(gpt2_spec(), ModelType::llama), "model.positions = learned"));
}

TEST_CASE("hf names: q/k/v heads and gate/up rows go where QkvLayout and SwiGLU put them", "[hf]") {
  const nn::GptSpec spec = llama_spec();
  const std::vector<HfMapping> all = hf_mappings(spec, HfArch::llama);
  const HfMapping* qkv = nullptr;
  const HfMapping* fc = nullptr;
  for (const HfMapping& m : all) {
    if (m.param == "h.1.attn.c_attn.weight") qkv = &m;
    if (m.param == "h.1.mlp.c_fc.weight") fc = &m;
  }
  REQUIRE(qkv != nullptr);
  REQUIRE(fc != nullptr);
  CHECK(all.back().param == "lm_head.weight");
  CHECK(qkv->parts.at(1).name == "model.layers.1.self_attn.k_proj.weight");
  CHECK(qkv->parts.at(1).shape == Shape{16, 32});  // 2 kv heads of 8
  // c_attn row r holds the value r (each row constant), so a part's rows say where they were.
  std::vector<float> value(static_cast<std::size_t>(shape_numel(qkv->shape)));
  for (std::size_t i = 0; i < value.size(); ++i) value[i] = static_cast<float>(i / 32);
  const std::vector<std::vector<float>> parts = split_to_hf(*qkv, value);
  // Grouped (4 query heads, 2 kv heads, g = 2): rows [q0 q1 k0 v0 | q2 q3 k1 v1] x 8.
  CHECK(parts[0][2 * 8 * 32] == 32.0f);  // q head 2 starts at row 4 * 8
  CHECK(parts[1][1 * 8 * 32] == 48.0f);  // k head 1 at row 6 * 8
  CHECK(parts[2][0] == 24.0f);           // v head 0 at row 3 * 8
  CHECK(join_from_hf(*qkv, parts) == value);
  std::vector<float> gate_up(static_cast<std::size_t>(shape_numel(fc->shape)));
  for (std::size_t i = 0; i < gate_up.size(); ++i) gate_up[i] = static_cast<float>(i);
  const std::vector<std::vector<float>> halves = split_to_hf(*fc, gate_up);
  CHECK(fc->parts.at(0).name == "model.layers.1.mlp.gate_proj.weight");
  CHECK(halves[1][0] == static_cast<float>(48 * 32));  // up_proj is the second block of rows
  CHECK(join_from_hf(*fc, halves) == gate_up);

  // GPT-2's Conv1D weights are the transposes.
  for (const HfMapping& m : hf_mappings(gpt2_spec(), HfArch::gpt2))
    if (m.param == "h.0.mlp.c_fc.weight") {
      CHECK(m.parts.at(0).name == "transformer.h.0.mlp.c_fc.weight");
      CHECK(m.parts.at(0).shape == Shape{32, 128});
      std::vector<float> w(32 * 128);
      for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i);
      const std::vector<float> t = split_to_hf(m, w).at(0);
      CHECK(t[1] == w[32]);  // [in 0, out 1] = Trellis [out 1, in 0]
      CHECK(join_from_hf(m, {t}) == w);
    }
}
