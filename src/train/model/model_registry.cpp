// The one list of registered models, and what is common to all of them (model_registry.hpp).
#include "trellis/train/model/model_registry.hpp"

#include "trellis/core/error.hpp"

namespace trellis {

const std::vector<ModelRegistration>& model_registry() {
  static const std::vector<ModelRegistration> registry = {mlp_registration(), cnn_registration(),
                                                          gpt_registration(), llama_registration()};
  return registry;
}

const ModelRegistration& model_registration(ModelType type) {
  for (const ModelRegistration& r : model_registry())
    if (r.type == type) return r;
  throw Error("internal: model type " + std::to_string(static_cast<int>(type)) +
              " is not registered");
}

const std::vector<std::pair<const char*, ModelType>>& model_type_names() {
  static const std::vector<std::pair<const char*, ModelType>> names = [] {
    std::vector<std::pair<const char*, ModelType>> list;
    for (const ModelRegistration& r : model_registry()) list.emplace_back(r.name, r.type);
    return list;
  }();
  return names;
}

const char* model_type_name(ModelType type) { return model_registration(type).name; }

namespace {

// "mlp and gpt": the models that have a property.
std::string models_with(bool ModelRegistration::*property) {
  std::vector<std::string> names;
  for (const ModelRegistration& r : model_registry())
    if (r.*property) names.push_back(r.name);
  std::string text;
  for (std::size_t i = 0; i < names.size(); ++i)
    text += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return text;
}

}  // namespace

std::unique_ptr<nn::Model> build_model(const ModelBuildArgs& args) {
  const ModelRegistration& r = model_registration(args.model.type);
  if (args.tp.active() && !r.tensor_parallel)
    throw ConfigError("config key parallel.tp = " + std::to_string(args.tp.size()) +
                      ": model.type = " + r.name + " has no tensor-parallel form (" +
                      models_with(&ModelRegistration::tensor_parallel) +
                      " have); use parallel.tp = 1");
  const bool selective = args.recompute.mode == nn::Recompute::selective;
  if (args.recompute.mode != nn::Recompute::none &&
      !(selective ? r.recompute_selective : r.recompute_blocks))
    throw ConfigError(std::string("config key memory.recompute = ") +
                      nn::recompute_name(args.recompute.mode) + ": model.type = " + r.name +
                      " has no such recomputation (" +
                      models_with(selective ? &ModelRegistration::recompute_selective
                                            : &ModelRegistration::recompute_blocks) +
                      " have); use memory.recompute = none");
  return r.build(args);
}

nn::RecomputeSpec recompute_spec(const MemoryConfig& memory) {
  nn::RecomputeSpec spec;
  spec.mode = nn::parse_recompute(memory.recompute);
  spec.every = memory.recompute_every;
  return spec;
}

std::unique_ptr<nn::Model> build_model(const ModelConfig& model, const KernelsConfig& kernels,
                                       const DataShape& data, std::int64_t capacity,
                                       nn::ParameterStore& store, const MpiComm* dp,
                                       nn::TensorParallel tp, nn::StageRange stage,
                                       nn::RecomputeSpec recompute) {
  return build_model(
      ModelBuildArgs{model, kernels, data, capacity, store, dp, tp, stage, recompute});
}

std::unique_ptr<nn::Model> int8_model(ModelType type, std::unique_ptr<nn::Model> fp32,
                                      const nn::ParameterStore& store,
                                      const std::vector<int8::Int8Layer>& layers,
                                      const int8::Int8Options& options) {
  const ModelRegistration& r = model_registration(type);
  if (!r.to_int8) throw ConfigError(std::string("model.type = ") + r.name + " has no int8 form");
  return r.to_int8(std::move(fp32), store, layers, options);
}

std::vector<double> model_unit_costs(const ModelConfig& model, const DataShape& data) {
  const ModelRegistration& r = model_registration(model.type);
  if (!r.pipeline_parallel)
    throw ConfigError(std::string("config key parallel.pp: model.type = ") + r.name +
                      " has no pipeline-parallel form (" +
                      models_with(&ModelRegistration::pipeline_parallel) +
                      " have); use parallel.pp = 1");
  return r.unit_costs(model, data);
}

}  // namespace trellis
