// model.type = gpt: a GPT-2-style decoder on token sequences (nn/gpt.hpp).
#include "registration_util.hpp"
#include "trellis/int8/gpt.hpp"
#include "trellis/nn/gpt.hpp"
#include "trellis/train/model/model_registry.hpp"

#include <algorithm>

namespace trellis {

namespace {

nn::GptSpec gpt_spec(const ModelConfig& model, const DataShape& data, std::int64_t capacity) {
  if (data.seq_len <= 0)
    throw ConfigError("config key model.type = gpt needs a token dataset (trellis.tokens)");
  const int vocab = model.vocab > 0 ? model.vocab : data.classes;
  if (vocab < data.classes)
    throw ConfigError("config key model.vocab = " + std::to_string(model.vocab) +
                      " is smaller than the data's vocab_size " + std::to_string(data.classes));
  nn::GptSpec spec;
  spec.n_layer = model.n_layer;
  spec.n_head = model.n_head;
  spec.d_model = model.d_model;
  spec.seq_len = model.seq_len;
  spec.vocab = vocab;
  spec.dropout = model.dropout;
  spec.capacity = spec_int(capacity, "batch");
  return spec;
}

ModelSizes gpt_sizes(const ModelConfig& model, const DataShape& data, int resolved_vocab) {
  using Bytes = long double;
  ModelSizes s;
  const Bytes d = model.d_model, layers = model.n_layer, heads = model.n_head;
  const Bytes T = model.seq_len;
  const Bytes V = std::max<Bytes>(resolved_vocab > 0 ? resolved_vocab : 0, data.classes);
  const Bytes block = 12 * d * d + 13 * d;
  s.params = V * d + T * d + layers * block + 2 * d;
  // Per token: about 26 d floats per block plus 2 per head (the flash attention keeps a
  // logsumexp and a row dot per (token, head), no [T, T] matrices), and the logits.
  s.per_sample = T * (layers * (26 * d + 2 * heads) + 2 * V);
  if (V * d >= layers * block)
    s.params_key = model.vocab > 0 ? "model.vocab" : "model.d_model";
  else
    s.params_key = layers > d ? "model.n_layer" : "model.d_model";
  s.sample_key = 2 * V >= layers * 26 * d && model.vocab > 0 ? "model.vocab" : "model.d_model";
  return s;
}

}  // namespace

ModelRegistration gpt_registration() {
  ModelRegistration r;
  r.type = ModelType::gpt;
  r.name = "gpt";
  r.config_keys = {"model.n_layer", "model.n_head", "model.d_model",
                   "model.seq_len", "model.vocab",  "model.dropout"};
  r.data = DataKind::tokens;
  r.tensor_parallel = true;
  r.pipeline_parallel = true;
  r.build = split_builder<nn::Gpt>(gpt_spec);
  r.unit_costs = [](const ModelConfig& model, const DataShape& data) {
    return nn::gpt_unit_costs(gpt_spec(model, data, 1));
  };
  // The gpt's own shape rules (d_model a multiple of n_head, ...), before any data is read;
  // the vocabulary and the capacity are not known yet.
  r.validate = [](const ModelConfig& model) {
    nn::GptSpec shape;
    shape.n_layer = model.n_layer, shape.n_head = model.n_head;
    shape.d_model = model.d_model, shape.seq_len = model.seq_len;
    shape.vocab = 1, shape.capacity = 1, shape.dropout = model.dropout;
    nn::validate(shape);
  };
  r.flops_per_sample = flops_of_built;
  r.sizes = gpt_sizes;
  r.to_int8 = int8_converter<nn::Gpt, int8::Int8Gpt>();
  return r;
}

}  // namespace trellis
