// The models Trellis trains, each registered once (model_registry.cpp lists the registrations;
// each model's lives in its own file, mlp_registration.cpp, ...). A registration says all that
// the rest of the application needs to know about a model, so nothing else switches on
// model.type: its name, the config keys it reads, the kind of data it takes, how it is built
// (and whether tensor or pipeline parallelism can split it), its pipeline unit costs, its FLOPs
// per sample, its sizes for the memory estimate, its structured-pruning widths, how a
// weights file's tensor shapes give back the data shape it was built for, and its int8 form.
//
// Adding a model: its layers under nn/, a ModelType value, one registration file here.
#pragma once

#include "trellis/comm/mpi_comm.hpp"
#include "trellis/data/data_shape.hpp"
#include "trellis/int8/int8_model.hpp"
#include "trellis/int8/quantize_layer.hpp"
#include "trellis/nn/block_stack.hpp"
#include "trellis/nn/model.hpp"
#include "trellis/nn/parameter_store.hpp"
#include "trellis/nn/tensor_parallel.hpp"
#include "trellis/train/model/model_config.hpp"
#include "trellis/train/model/model_work.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace trellis {

enum class DataKind { samples, tokens };  // trellis.samples (labelled) | trellis.tokens

struct ModelBuildArgs {
  const ModelConfig& model;
  const KernelsConfig& kernels;
  const DataShape& data;
  std::int64_t capacity;      // the most samples one forward/backward call will see
  nn::ParameterStore& store;  // where the parameters are registered (the caller finalizes it)
  const MpiComm* dp;          // for layers that synchronise over dp (BatchNorm), or null
  nn::TensorParallel tp;
  nn::StageRange stage;
  nn::RecomputeSpec recompute;  // memory.recompute (models with recompute_blocks only)
};

// What the memory estimate (config/memory_estimate.hpp) needs of a model, in floats, for the
// whole logical model, and the key to blame when each part is too large.
struct ModelSizes {
  long double params = 0;            // parameters
  long double per_sample = 0;        // activations and their gradients of one sample
  long double flops_per_sample = 0;  // training FLOPs (forward + backward); 0: not known
  std::string params_key, sample_key;
};

struct ModelRegistration {
  ModelType type;
  const char* name;                      // model.type
  std::vector<const char*> config_keys;  // the model.* (and kernels.*) keys it reads
  DataKind data;
  bool tensor_parallel;              // built under parallel.tp > 1
  bool pipeline_parallel;            // split into parallel.pp stages (unit_costs is set)
  bool recompute_blocks = false;     // memory.recompute = full (ModelBuildArgs::recompute)
  bool recompute_selective = false;  // memory.recompute = selective too
  std::function<std::unique_ptr<nn::Model>(const ModelBuildArgs&)> build;
  // Relative cost of each pipeline unit (pipeline_parallel models only).
  std::function<std::vector<double>(const ModelConfig&, const DataShape&)> unit_costs;
  // The model's shape rules that need no data (ConfigError naming the keys); run when the
  // configuration is read.
  std::function<void(const ModelConfig&)> validate;
  // The model.* values with every "auto" (or 0 = the type's default) option replaced by what
  // this type chooses, so two configurations of one model compare equal key by key (init.weights
  // against the file's). Unset: the values are what they say.
  std::function<ModelConfig(const ModelConfig&)> resolved;
  // Training FLOPs per sample of the whole logical model (forward + backward), whatever part
  // of it `built` (this rank's stage) holds.
  std::function<double(const ModelConfig&, const DataShape&, const nn::Model& built)>
      flops_per_sample;
  // vocab: the resolved vocabulary (language models), 0 when not known yet.
  std::function<ModelSizes(const ModelConfig&, const DataShape&, int vocab)> sizes;
  // The work of one sample, unit by unit, on one of `tp` tensor-parallel ranks, for the
  // planner (model_work.hpp); vocab as for sizes.
  std::function<ModelWork(const ModelConfig&, const DataShape&, int vocab, int tp,
                          bool sequence_parallel)>
      work;
  // Structured pruning (prune.method = structured; trellis export --prune): writes the widths
  // of the surviving units, in the order of nn::Model::prunable_units(), into the config key
  // that holds them. Unset: the model has no structurally prunable units.
  std::function<void(ModelConfig&, const std::vector<int>& widths)> set_pruned_widths;
  // The data shape a weights file's parameters were built for; shape_of(name) is the stored
  // logical shape of parameter `name` (e.g. "head.weight").
  std::function<DataShape(const ModelConfig&,
                          const std::function<Shape(const std::string&)>& shape_of)>
      data_shape_from_weights;
  // The model's int8 inference form (int8/int8_model.hpp), converted from the trained model
  // `fp32` (which it then owns) with an int8 weights file's layers.
  using Int8Converter = std::function<std::unique_ptr<nn::Model>(
      std::unique_ptr<nn::Model> fp32, const nn::ParameterStore& store,
      const std::vector<int8::Int8Layer>& layers, const int8::Int8Options& options)>;
  Int8Converter to_int8;
};

// Every registered model, in the order `trellis train --help` lists model.type's names.
const std::vector<ModelRegistration>& model_registry();
const ModelRegistration& model_registration(ModelType type);

// The model of `args.model.type`, built by its registration; ConfigError naming parallel.tp
// or parallel.pp when the model has no such split.
std::unique_ptr<nn::Model> build_model(const ModelBuildArgs& args);
std::unique_ptr<nn::Model> build_model(const ModelConfig& model, const KernelsConfig& kernels,
                                       const DataShape& data, std::int64_t capacity,
                                       nn::ParameterStore& store, const MpiComm* dp,
                                       nn::TensorParallel tp = {}, nn::StageRange stage = {},
                                       nn::RecomputeSpec recompute = {});
// memory.recompute and memory.recompute_every as the model builder takes them; ConfigError
// naming the key when a value is bad.
nn::RecomputeSpec recompute_spec(const MemoryConfig& memory);

// `fp32` (a model of `type`, built and loaded) in its int8 form with `layers`, owning it.
std::unique_ptr<nn::Model> int8_model(ModelType type, std::unique_ptr<nn::Model> fp32,
                                      const nn::ParameterStore& store,
                                      const std::vector<int8::Int8Layer>& layers,
                                      const int8::Int8Options& options = {});
// Relative cost of each pipeline unit; ConfigError naming parallel.pp for models that cannot
// be split.
std::vector<double> model_unit_costs(const ModelConfig& model, const DataShape& data);

// Registrations (one file each).
ModelRegistration mlp_registration();
ModelRegistration cnn_registration();
ModelRegistration gpt_registration();
ModelRegistration llama_registration();

}  // namespace trellis
