#include "trellis/train/hf/hf_config.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/format.hpp"

#include <nlohmann/json.hpp>

#include <climits>
#include <cstdlib>

namespace trellis {

namespace {

using Json = nlohmann::json;

// A float as the double of its shortest decimal form, so that config.json says 1e-05 for
// model.norm_eps = 1e-5 and not 9.999999747378752e-06.
double json_real(float value) {
  for (int digits = 6; digits < 9; ++digits) {
    const std::string text = format_text("%.*g", digits, static_cast<double>(value));
    if (std::strtof(text.c_str(), nullptr) == value) return std::strtod(text.c_str(), nullptr);
  }
  return static_cast<double>(value);
}

[[noreturn]] void unsupported(const std::string& model_key, const std::string& value,
                              const std::string& why) {
  throw ConfigError("export --format hf: " + model_key + " = " + value + ": " + why);
}

}  // namespace

const char* hf_architecture(HfArch arch) {
  return arch == HfArch::gpt2 ? "GPT2LMHeadModel" : "LlamaForCausalLM";
}
const char* hf_model_type(HfArch arch) { return arch == HfArch::gpt2 ? "gpt2" : "llama"; }

HfArch hf_arch_for(const nn::GptSpec& spec, ModelType type) {
  const nn::BlockSpec block = nn::gpt_block_spec(spec, nullptr);
  if (spec.positions == nn::Positions::rope) {
    const std::string llama = "LlamaForCausalLM (the rotary-position decoder of transformers) ";
    if (spec.norm != nn::NormKind::rmsnorm)
      unsupported("model.norm", nn::norm_kind_name(spec.norm), llama + "has RMSNorm");
    if (spec.mlp != nn::MlpKind::swiglu)
      unsupported("model.mlp", nn::mlp_kind_name(spec.mlp), llama + "has a SwiGLU MLP");
    return HfArch::llama;
  }
  if (type == ModelType::llama)
    unsupported("model.positions", "learned",
                "LlamaForCausalLM has rotary positions (and GPT2LMHeadModel is for "
                "model.type = gpt)");
  const std::string gpt2 = "GPT2LMHeadModel (learned positions: GPT-2) ";
  if (spec.norm != nn::NormKind::layernorm)
    unsupported("model.norm", nn::norm_kind_name(spec.norm), gpt2 + "has LayerNorm");
  if (spec.mlp == nn::MlpKind::swiglu)
    unsupported("model.mlp", nn::mlp_kind_name(spec.mlp), gpt2 + "has a GELU MLP");
  if (block.kv_heads() != spec.n_head)
    unsupported("model.n_kv_head", std::to_string(spec.n_kv_head),
                gpt2 + "has multi-head attention (n_kv_head = n_head)");
  if (!spec.bias) unsupported("model.bias", "false", gpt2 + "has biases on every Linear");
  if (!spec.tied_head)
    unsupported("model.tied_head", "false", gpt2 + "ties its output head to wte");
  return HfArch::gpt2;
}

std::string hf_config_json(const nn::GptSpec& spec, HfArch arch, Precision dtype) {
  const nn::BlockSpec block = nn::gpt_block_spec(spec, nullptr);
  const char* torch_dtype = dtype == Precision::bf16   ? "bfloat16"
                            : dtype == Precision::fp16 ? "float16"
                                                       : "float32";
  const double dropout = json_real(spec.dropout);
  Json c;
  c["architectures"] = {hf_architecture(arch)};
  c["model_type"] = hf_model_type(arch);
  c["vocab_size"] = spec.vocab;
  c["torch_dtype"] = torch_dtype;
  c["initializer_range"] = 0.02;
  c["use_cache"] = true;
  // Trellis models have no special tokens (the byte tokenizer has none); transformers'
  // defaults (GPT-2's 50256) would lie outside a small vocabulary.
  c["bos_token_id"] = nullptr;
  c["eos_token_id"] = nullptr;
  if (arch == HfArch::gpt2) {
    c["n_embd"] = spec.d_model;
    c["n_layer"] = spec.n_layer;
    c["n_head"] = spec.n_head;
    c["n_positions"] = spec.seq_len;
    c["n_ctx"] = spec.seq_len;
    c["n_inner"] = block.ff_width();
    // "gelu": the exact erf form; "gelu_new": the tanh approximation (original GPT-2's).
    c["activation_function"] = spec.mlp == nn::MlpKind::gelu_tanh ? "gelu_new" : "gelu";
    c["layer_norm_epsilon"] = json_real(spec.norm_eps);
    c["resid_pdrop"] = c["embd_pdrop"] = c["attn_pdrop"] = dropout;
    c["scale_attn_weights"] = true;
    c["scale_attn_by_inverse_layer_idx"] = false;
    c["reorder_and_upcast_attn"] = false;
    c["tie_word_embeddings"] = true;
    return c.dump(2) + "\n";
  }
  c["hidden_size"] = spec.d_model;
  c["intermediate_size"] = block.ff_width();
  c["num_hidden_layers"] = spec.n_layer;
  c["num_attention_heads"] = spec.n_head;
  c["num_key_value_heads"] = block.kv_heads();
  c["head_dim"] = spec.d_model / spec.n_head;
  c["max_position_embeddings"] = spec.seq_len;
  c["rms_norm_eps"] = json_real(spec.norm_eps);
  c["hidden_act"] = "silu";
  c["attention_bias"] = spec.bias;
  c["mlp_bias"] = spec.bias;
  c["attention_dropout"] = dropout;
  c["tie_word_embeddings"] = spec.tied_head;
  c["pretraining_tp"] = 1;
  Json rope = {{"rope_type", "default"}, {"rope_theta", spec.rope.theta}};
  c["rope_theta"] = spec.rope.theta;
  c["rope_scaling"] = nullptr;
  if (spec.rope.factor > 0) {
    c["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", spec.rope.factor},
                         {"low_freq_factor", spec.rope.low_freq_factor},
                         {"high_freq_factor", spec.rope.high_freq_factor},
                         {"original_max_position_embeddings", spec.rope.original_context}};
    rope.update(c["rope_scaling"]);
  }
  c["rope_parameters"] = rope;  // transformers 5's spelling of the two keys above
  return c.dump(2) + "\n";
}

// ---- config.json -> model.* ---------------------------------------------------------------

namespace {

// Typed reads of config.json keys; every failure names the file, the key and its value.
class ConfigReader {
 public:
  ConfigReader(const Json& json, std::string path) : json_(json), path_(std::move(path)) {}

  [[noreturn]] void fail(const std::string& key, const Json& value, const std::string& why) const {
    throw InputError(path_ + ": " + key + " = " + value.dump() + ": " + why);
  }
  bool has(const char* key) const { return json_.contains(key) && !json_[key].is_null(); }
  const Json& at(const char* key) const { return json_.at(key); }

  int integer(const char* key, int fallback, int minimum = 1) const {
    if (!has(key)) return fallback;
    const Json& v = json_[key];
    if (!v.is_number_integer() || v.get<long long>() < minimum || v.get<long long>() > INT_MAX)
      fail(key, v, "expected an integer >= " + std::to_string(minimum));
    return v.get<int>();
  }
  double real(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    if (!json_[key].is_number()) fail(key, json_[key], "expected a number");
    return json_[key].get<double>();
  }
  bool boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!json_[key].is_boolean()) fail(key, json_[key], "expected true or false");
    return json_[key].get<bool>();
  }
  std::string text(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!json_[key].is_string()) fail(key, json_[key], "expected a string");
    return json_[key].get<std::string>();
  }

 private:
  const Json& json_;
  std::string path_;
};

void read_gpt2(const ConfigReader& r, HfModelConfig& out) {
  ModelConfig& m = out.model;
  m.type = ModelType::gpt;
  m.d_model = r.integer("n_embd", 768);
  m.n_layer = r.integer("n_layer", 12);
  m.n_head = r.integer("n_head", 12);
  m.seq_len = r.integer("n_positions", 1024);
  m.vocab = r.integer("vocab_size", 50257);
  m.d_ff = r.integer("n_inner", 4 * m.d_model);
  m.n_kv_head = m.n_head;
  m.positions = "learned", m.norm = "layernorm", m.mlp = "gelu";
  m.bias = "true", m.tied_head = "true";
  m.norm_eps = static_cast<float>(r.real("layer_norm_epsilon", 1e-5));
  // transformers' gelu_new, gelu_pytorch_tanh and gelu_fast are one function written three
  // ways: the tanh approximation (model.mlp = gelu_tanh); "gelu" is the exact erf form.
  const std::string act = r.text("activation_function", "gelu_new");
  if (act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu_fast") {
    m.mlp = "gelu_tanh";
  } else if (act != "gelu") {
    r.fail("activation_function", act,
           "Trellis' GPT-2 MLP computes \"gelu\" (the exact erf form) or \"gelu_new\" (its "
           "tanh approximation; also read as gelu_pytorch_tanh and gelu_fast)");
  }
  if (!r.boolean("scale_attn_weights", true))
    r.fail("scale_attn_weights", false, "Trellis always scales attention by 1/sqrt(head_dim)");
  if (r.boolean("scale_attn_by_inverse_layer_idx", false))
    r.fail("scale_attn_by_inverse_layer_idx", true, "not computed by Trellis");
  if (!r.boolean("tie_word_embeddings", true))
    r.fail("tie_word_embeddings", false, "GPT-2 models are read with a head tied to wte");
  if (r.has("n_ctx") && r.integer("n_ctx", 0) != m.seq_len)
    r.fail("n_ctx", r.at("n_ctx"), "differs from n_positions = " + std::to_string(m.seq_len));
  const double resid = r.real("resid_pdrop", 0.1), embd = r.real("embd_pdrop", 0.1),
               attn = r.real("attn_pdrop", 0.1);
  m.dropout = static_cast<float>(resid);
  if (embd != resid || attn != resid)
    out.notes.push_back(format_text(
        "model.dropout = %g (resid_pdrop; Trellis has one rate, embd_pdrop %g and attn_pdrop %g "
        "not carried over)",
        resid, embd, attn));
}

// The Llama 3 frequency scaling, from rope_scaling (transformers 4) or rope_parameters (5).
void read_rope(const ConfigReader& r, ModelConfig& m) {
  const char* key = r.has("rope_parameters") ? "rope_parameters" : "rope_scaling";
  m.rope_theta = r.real("rope_theta", 10000.0);
  if (!r.has(key)) return;
  const Json& rope = r.at(key);
  if (!rope.is_object()) r.fail(key, rope, "expected an object");
  auto name = [&](const char* field) { return std::string(key) + "." + field; };
  const char* type_key = rope.contains("rope_type") ? "rope_type" : "type";
  const bool typed = rope.contains(type_key) && !rope[type_key].is_null();
  const std::string type = typed ? rope[type_key].dump() : "\"default\"";
  if (rope.contains("rope_theta")) {
    if (!rope["rope_theta"].is_number())
      r.fail(name("rope_theta"), rope["rope_theta"], "not a number");
    m.rope_theta = rope["rope_theta"].get<double>();
  }
  if (type == "\"default\"") return;
  if (type != "\"llama3\"")
    r.fail(name(type_key), rope[type_key],
           "Trellis has Llama 3's frequency scaling (\"llama3\") only");
  auto number = [&](const char* field) {
    if (!rope.contains(field) || !rope[field].is_number())
      r.fail(name(field), rope.contains(field) ? rope[field] : Json(nullptr),
             "llama3 scaling needs a number");
    return rope[field].get<double>();
  };
  m.rope_scaling_factor = number("factor");
  m.rope_low_freq_factor = number("low_freq_factor");
  m.rope_high_freq_factor = number("high_freq_factor");
  const double original = number("original_max_position_embeddings");
  if (original < 1 || original > INT_MAX || original != static_cast<int>(original))
    r.fail(name("original_max_position_embeddings"), rope["original_max_position_embeddings"],
           "expected a positive integer");
  m.rope_original_context = static_cast<int>(original);
}

void read_llama(const ConfigReader& r, HfModelConfig& out) {
  ModelConfig& m = out.model;
  m.type = ModelType::llama;
  m.d_model = r.integer("hidden_size", 4096);
  m.d_ff = r.integer("intermediate_size", 11008);
  m.n_layer = r.integer("num_hidden_layers", 32);
  m.n_head = r.integer("num_attention_heads", 32);
  m.n_kv_head = r.integer("num_key_value_heads", m.n_head);
  m.seq_len = r.integer("max_position_embeddings", 2048);
  m.vocab = r.integer("vocab_size", 32000);
  m.norm_eps = static_cast<float>(r.real("rms_norm_eps", 1e-6));
  m.positions = "rope", m.norm = "rmsnorm", m.mlp = "swiglu";
  if (m.d_model % m.n_head != 0)
    r.fail("hidden_size", m.d_model,
           "not a multiple of num_attention_heads = " + std::to_string(m.n_head));
  if (r.has("head_dim") && r.integer("head_dim", 0) != m.d_model / m.n_head)
    r.fail("head_dim", r.at("head_dim"),
           "Trellis needs head_dim = hidden_size / num_attention_heads = " +
               std::to_string(m.d_model / m.n_head));
  const std::string act = r.text("hidden_act", "silu");
  if (act != "silu") r.fail("hidden_act", act, "Trellis' SwiGLU gates with silu only");
  const bool attention_bias = r.boolean("attention_bias", false);
  if (r.boolean("mlp_bias", false) != attention_bias)
    r.fail("mlp_bias", !attention_bias,
           "differs from attention_bias; Trellis has one flag (model.bias) for both");
  m.bias = attention_bias ? "true" : "false";
  m.tied_head = r.boolean("tie_word_embeddings", false) ? "true" : "false";
  m.dropout = static_cast<float>(r.real("attention_dropout", 0.0));
  read_rope(r, m);
  if (r.integer("pretraining_tp", 1) != 1)
    out.notes.push_back("pretraining_tp > 1 only slices transformers' matmuls; ignored");
}

}  // namespace

HfModelConfig hf_model_config(const std::string& json_text, const std::string& path,
                              const ModelConfig& base) {
  Json json;
  try {
    json = Json::parse(json_text);
  } catch (const Json::exception& e) {
    throw InputError(path + ": not JSON: " + e.what());
  }
  if (!json.is_object()) throw InputError(path + ": not a JSON object");
  const ConfigReader r(json, path);
  if (!r.has("model_type")) throw InputError(path + ": no model_type (is this a model's config?)");
  const std::string type = r.text("model_type", "");
  HfModelConfig out;
  out.model = base;
  if (type == "gpt2") {
    out.arch = HfArch::gpt2;
    read_gpt2(r, out);
  } else if (type == "llama") {
    out.arch = HfArch::llama;
    read_llama(r, out);
  } else {
    const std::string supported =
        "Trellis reads \"gpt2\" (GPT2LMHeadModel) and \"llama\" (LlamaForCausalLM)";
    r.fail("model_type", type,
           supported +
               (r.has("sliding_window") ? "; sliding-window attention is not in Trellis" : ""));
  }
  if (r.has("architectures") && r.at("architectures").is_array())
    for (const Json& name : r.at("architectures"))
      if (name.is_string() && name.get<std::string>() != hf_architecture(out.arch))
        out.notes.push_back("architectures names " + name.dump() + "; read as " +
                            hf_architecture(out.arch));
  return out;
}

std::string hf_tokenizer_config_json(const std::string& tokenizer_json, int seq_len) {
  nlohmann::json out = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                        {"model_max_length", seq_len}};
  const nlohmann::json tok = nlohmann::json::parse(tokenizer_json, nullptr, false);
  if (tok.is_object() && tok.contains("added_tokens") && tok["added_tokens"].is_array()) {
    for (const auto& added : tok["added_tokens"]) {
      if (added.value("special", false) && added.contains("content")) {
        const std::string eot = added["content"].get<std::string>();
        out["bos_token"] = eot, out["eos_token"] = eot, out["pad_token"] = eot;
        break;
      }
    }
  }
  return out.dump(2) + "\n";
}

}  // namespace trellis
