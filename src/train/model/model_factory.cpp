#include "trellis/train/model/model_factory.hpp"

#include "trellis/core/error.hpp"
#include "trellis/nn/cnn.hpp"
#include "trellis/nn/gpt.hpp"
#include "trellis/nn/mlp.hpp"

#include <limits>

namespace trellis {

namespace {

int to_int(std::int64_t value, const char* what) {
  if (value < 0 || value > std::numeric_limits<int>::max())
    throw ConfigError(std::string(what) + " = " + std::to_string(value) +
                      " does not fit one model call");
  return static_cast<int>(value);
}

nn::MlpSpec mlp_spec(const ModelConfig& model, const DataShape& data, std::int64_t capacity) {
  if (data.feature_numel <= 0)
    throw ConfigError(
        "config key model.type = mlp needs a labelled-sample dataset (trellis.samples)");
  nn::MlpSpec spec;
  spec.input_dim = to_int(data.feature_numel, "sample size");
  spec.hidden = model.hidden;
  spec.classes = data.classes;
  spec.activation = model.activation;
  spec.dropout = model.dropout;
  spec.init = model.init;
  spec.capacity = to_int(capacity, "batch");
  return spec;
}

std::unique_ptr<nn::Model> build_mlp(const ModelConfig& model, const DataShape& data,
                                     std::int64_t capacity, nn::ParameterStore& store,
                                     nn::TensorParallel tp, nn::StageRange stage) {
  nn::MlpSpec spec = mlp_spec(model, data, capacity);
  spec.tp = tp;
  spec.stage = stage;
  return std::make_unique<nn::Mlp>(spec, store);
}

std::unique_ptr<nn::Model> build_cnn(const ModelConfig& model, const DataShape& data,
                                     std::int64_t capacity, nn::ParameterStore& store,
                                     const MpiComm* dp) {
  if (data.sample_shape.size() != 3)
    throw ConfigError(
        "config key model.type = cnn needs image samples [C, H, W], but the training set has " +
        shape_string(data.sample_shape));
  nn::CnnSpec spec;
  spec.channels = to_int(data.sample_shape[0], "image channels");
  spec.height = to_int(data.sample_shape[1], "image height");
  spec.width = to_int(data.sample_shape[2], "image width");
  spec.classes = data.classes;
  spec.widths = model.widths;
  spec.blocks_per_stage = model.blocks;
  spec.block_widths = model.block_widths;
  spec.sync_bn = model.sync_bn && dp != nullptr;
  spec.conv_impl = nn::parse_conv_impl(model.conv_impl);
  spec.dp = dp;
  spec.capacity = to_int(capacity, "batch");
  return std::make_unique<nn::Cnn>(spec, store);
}

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
  spec.capacity = to_int(capacity, "batch");
  return spec;
}

std::unique_ptr<nn::Model> build_gpt(const ModelConfig& model, const DataShape& data,
                                     std::int64_t capacity, nn::ParameterStore& store,
                                     nn::TensorParallel tp, nn::StageRange stage) {
  nn::GptSpec spec = gpt_spec(model, data, capacity);
  spec.tp = tp;
  spec.stage = stage;
  return std::make_unique<nn::Gpt>(spec, store);
}

}  // namespace

std::vector<double> model_unit_costs(const ModelConfig& model, const DataShape& data) {
  switch (model.type) {
    case ModelType::mlp:
      return nn::mlp_unit_costs(mlp_spec(model, data, 1));
    case ModelType::gpt:
      return nn::gpt_unit_costs(gpt_spec(model, data, 1));
    case ModelType::cnn:
      break;
  }
  throw ConfigError(std::string("config key parallel.pp: model.type = ") +
                    model_type_name(model.type) +
                    " has no pipeline-parallel form (mlp and gpt have); use parallel.pp = 1");
}

std::unique_ptr<nn::Model> build_model(const ModelConfig& model, const DataShape& data,
                                       std::int64_t capacity, nn::ParameterStore& store,
                                       const MpiComm* dp, nn::TensorParallel tp,
                                       nn::StageRange stage) {
  switch (model.type) {
    case ModelType::mlp:
      return build_mlp(model, data, capacity, store, tp, stage);
    case ModelType::gpt:
      return build_gpt(model, data, capacity, store, tp, stage);
    case ModelType::cnn:
      if (tp.active())
        throw ConfigError("config key parallel.tp = " + std::to_string(tp.size()) +
                          ": model.type = cnn has no tensor-parallel form (mlp and gpt have); "
                          "use parallel.tp = 1");
      return build_cnn(model, data, capacity, store, dp);
  }
  throw Error("internal: model.type " + std::to_string(static_cast<int>(model.type)));
}

}  // namespace trellis
