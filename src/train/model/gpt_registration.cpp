// model.type = gpt and model.type = llama: the decoder family (nn/gpt.hpp), one registration
// each, differing in what the "auto" options resolve to: GPT-2's (learned positions, LayerNorm,
// GELU MLP of 4 d, biases, tied head, scaled residual init) or Llama's (rotary positions,
// RMSNorm, SwiGLU of 8 d / 3 rounded up to 256, no biases, untied head, plain N(0, 0.02) init).
#include "decoder_work.hpp"
#include "registration_util.hpp"
#include "trellis/int8/gpt.hpp"
#include "trellis/nn/gpt.hpp"
#include "trellis/train/model/model_registry.hpp"

#include <algorithm>

namespace trellis {

namespace {

bool llama_family(ModelType type) { return type == ModelType::llama; }

bool resolved_flag(const std::string& value, bool llama_default) {
  return value == "auto" ? llama_default : value == "true";
}

// The architecture the model.* keys describe, without the data-dependent sizes (vocab 1,
// capacity 1).
nn::GptSpec decoder_shape(const ModelConfig& model) {
  const bool llama = llama_family(model.type);
  nn::GptSpec spec;
  spec.n_layer = model.n_layer, spec.n_head = model.n_head;
  spec.d_model = model.d_model, spec.seq_len = model.seq_len;
  spec.vocab = 1, spec.capacity = 1, spec.dropout = model.dropout;
  spec.n_kv_head = model.n_kv_head;
  spec.d_ff = model.d_ff;
  if (spec.d_ff == 0 && llama) {
    // Meta's rule (multiple_of 256): the SwiGLU MLP has about the GELU MLP's parameters.
    const long long f = (8LL * model.d_model + 2) / 3;
    spec.d_ff = static_cast<int>(std::min<long long>((f + 255) / 256 * 256, 1LL << 30));
  }
  const std::string positions =
      model.positions == "auto" ? (llama ? "rope" : "learned") : model.positions;
  spec.positions = positions == "rope" ? nn::Positions::rope : nn::Positions::learned;
  spec.rope.theta = model.rope_theta;
  spec.rope.factor = model.rope_scaling_factor;
  spec.rope.low_freq_factor = model.rope_low_freq_factor;
  spec.rope.high_freq_factor = model.rope_high_freq_factor;
  spec.rope.original_context = model.rope_original_context;
  spec.norm =
      nn::parse_norm_kind(model.norm == "auto" ? (llama ? "rmsnorm" : "layernorm") : model.norm);
  spec.norm_eps = model.norm_eps;
  spec.mlp = nn::parse_mlp_kind(model.mlp == "auto" ? (llama ? "swiglu" : "gelu") : model.mlp);
  spec.bias = resolved_flag(model.bias, !llama);
  spec.tied_head = resolved_flag(model.tied_head, !llama);
  spec.scaled_residual_init = !llama;
  return spec;
}

nn::GptSpec gpt_spec(const ModelConfig& model, const DataShape& data, std::int64_t capacity) {
  const char* type = model_type_name(model.type);
  if (data.seq_len <= 0)
    throw ConfigError(std::string("config key model.type = ") + type +
                      " needs a token dataset (trellis.tokens)");
  const int vocab = model.vocab > 0 ? model.vocab : data.classes;
  if (vocab < data.classes)
    throw ConfigError("config key model.vocab = " + std::to_string(model.vocab) +
                      " is smaller than the data's vocab_size " + std::to_string(data.classes));
  nn::GptSpec spec = decoder_shape(model);
  spec.vocab = vocab;
  spec.capacity = spec_int(capacity, "batch");
  return spec;
}

ModelSizes gpt_sizes(const ModelConfig& model, const DataShape& data, int resolved_vocab) {
  using Bytes = long double;
  ModelSizes s;
  nn::GptSpec spec = decoder_shape(model);
  const Bytes d = model.d_model, layers = model.n_layer, heads = model.n_head;
  const Bytes T = model.seq_len;
  const Bytes V = std::max<Bytes>(resolved_vocab > 0 ? resolved_vocab : 0, data.classes);
  const Bytes f = spec.d_ff > 0 ? spec.d_ff : 4 * d;
  const Bytes block = nn::gpt_block_params(spec);
  spec.vocab = 0;  // the blocks, norms and position table; the tables below
  s.params = V * d * (spec.tied_head ? 1 : 2) + nn::gpt_num_params(spec);
  // Per token: about 14 d floats per block plus 3 per MLP hidden unit (4 with SwiGLU), 2 per
  // head (the flash attention keeps a logsumexp and a row dot per (token, head), no [T, T]
  // matrices), and the logits. GPT-2's MLP of 4 d: 26 d.
  const Bytes per_block = 14 * d + (spec.mlp == nn::MlpKind::swiglu ? 4 : 3) * f + 2 * heads;
  s.per_sample = T * (layers * per_block + 2 * V);
  spec.vocab = static_cast<int>(std::min<Bytes>(V, 2147483647.0L));
  s.flops_per_sample = nn::gpt_flops_per_sequence(spec);
  if (V * d >= layers * block)
    s.params_key = model.vocab > 0 ? "model.vocab" : "model.d_model";
  else
    s.params_key = layers > d ? "model.n_layer" : "model.d_model";
  s.sample_key = 2 * V >= layers * per_block && model.vocab > 0 ? "model.vocab" : "model.d_model";
  return s;
}

ModelRegistration decoder_registration(ModelType type, const char* name) {
  ModelRegistration r;
  r.type = type;
  r.name = name;
  r.config_keys = {"model.n_layer",
                   "model.n_head",
                   "model.d_model",
                   "model.seq_len",
                   "model.vocab",
                   "model.dropout",
                   "model.n_kv_head",
                   "model.d_ff",
                   "model.positions",
                   "model.rope_theta",
                   "model.rope_scaling_factor",
                   "model.rope_low_freq_factor",
                   "model.rope_high_freq_factor",
                   "model.rope_original_context",
                   "model.norm",
                   "model.norm_eps",
                   "model.mlp",
                   "model.bias",
                   "model.tied_head"};
  r.data = DataKind::tokens;
  r.tensor_parallel = true;
  r.pipeline_parallel = true;
  r.recompute_blocks = true;
  r.recompute_selective = true;
  r.build = [](const ModelBuildArgs& a) -> std::unique_ptr<nn::Model> {
    nn::GptSpec spec = gpt_spec(a.model, a.data, a.capacity);
    spec.tp = a.tp;
    spec.stage = a.stage;
    spec.recompute = a.recompute;
    return std::make_unique<nn::Gpt>(spec, a.store);
  };
  r.unit_costs = [](const ModelConfig& model, const DataShape& data) {
    return nn::gpt_unit_costs(gpt_spec(model, data, 1));
  };
  // The shape rules (d_model a multiple of n_head, n_kv_head dividing n_head, ...), before any
  // data is read; the vocabulary and the capacity are not known yet.
  r.validate = [](const ModelConfig& model) {
    const nn::GptSpec shape = decoder_shape(model);
    nn::validate(shape);
    if (shape.positions == nn::Positions::rope) kernels::rope_inverse_frequencies(shape.rope, 2);
  };
  r.resolved = [](const ModelConfig& model) {
    const nn::GptSpec shape = decoder_shape(model);
    ModelConfig out = model;
    out.n_kv_head = nn::gpt_block_spec(shape, nullptr).kv_heads();
    out.d_ff = nn::gpt_block_spec(shape, nullptr).ff_width();
    out.positions = shape.positions == nn::Positions::rope ? "rope" : "learned";
    out.norm = nn::norm_kind_name(shape.norm);
    out.mlp = nn::mlp_kind_name(shape.mlp);
    out.bias = shape.bias ? "true" : "false";
    out.tied_head = shape.tied_head ? "true" : "false";
    return out;
  };
  r.flops_per_sample = flops_of_built;
  r.sizes = gpt_sizes;
  r.work = [](const ModelConfig& model, const DataShape& data, int vocab, int tp, bool sp) {
    nn::GptSpec spec = decoder_shape(model);
    spec.vocab = std::max(vocab, data.classes);
    return decoder_work(spec, tp, sp);
  };
  r.to_int8 = int8_converter<nn::Gpt, int8::Int8Gpt>();
  return r;
}

}  // namespace

ModelRegistration gpt_registration() { return decoder_registration(ModelType::gpt, "gpt"); }
ModelRegistration llama_registration() { return decoder_registration(ModelType::llama, "llama"); }

}  // namespace trellis
