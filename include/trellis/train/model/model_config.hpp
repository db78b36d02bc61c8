// The [model] section of the configuration: which model (model.type) and the keys that shape
// it. Each model's registration (model_registry.hpp) says which of these keys it reads.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace trellis {

enum class ModelType { mlp, cnn, gpt, llama };

// The one name <-> enum mapping of model.type, made from the model registry
// (model_registry.hpp): a model's name is given where it is registered.
const char* model_type_name(ModelType type);
const std::vector<std::pair<const char*, ModelType>>& model_type_names();

struct ModelConfig {
  ModelType type = ModelType::mlp;
  std::vector<int> hidden;        // mlp: widths of the hidden layers
  std::string activation;         // mlp: "relu" | "gelu"
  float dropout = 0;              // mlp, gpt
  std::string init;               // mlp: "kaiming" | "xavier"
  std::vector<int> widths;        // cnn: channels per stage
  int blocks = 0;                 // cnn: residual blocks per stage
  std::vector<int> block_widths;  // cnn: inner width of every block (empty: stage widths)
  bool sync_bn = false;           // cnn
  int n_layer = 0, n_head = 0, d_model = 0, seq_len = 0;  // gpt, llama
  int vocab =
      0;  // gpt, llama as given: 0 = the data's (DerivedConfig::vocab holds the resolved one)
  // The decoder family's options (gpt, llama); "auto": the model type's choice (GPT-2's for
  // gpt, Llama's for llama), resolved by its registration.
  int n_kv_head = 0;               // 0: n_head
  int d_ff = 0;                    // 0: gpt 4 d_model, llama 8 d_model / 3 up to a multiple of 256
  std::string positions = "auto";  // learned | rope
  std::string norm = "auto";       // layernorm | rmsnorm
  std::string mlp = "auto";        // gelu | swiglu
  std::string bias = "auto";       // true | false
  std::string tied_head = "auto";  // true | false
  double rope_theta = 10000.0;
  double rope_scaling_factor = 0.0;  // Llama 3 frequency scaling; 0: none
  double rope_low_freq_factor = 1.0, rope_high_freq_factor = 4.0;
  int rope_original_context = 8192;
  float norm_eps = 1e-5f;
};

// kernels.*: how the layers compute, which is no property of the model (a checkpoint resumes
// under another choice), so it lives apart from ModelConfig.
struct KernelsConfig {
  std::string conv;                  // cnn convolutions: auto | onednn | cudnn | im2col
  std::string conv_layout = "auto";  // cnn activations: auto | nchw | blocked
};

// memory.*: what the model trades for memory.
struct MemoryConfig {
  std::string recompute = "none";  // activation recomputation: none | full (nn/block_stack.hpp)
  int recompute_every = 1;         // blocks per recomputed group
  double limit_gb = 0;             // per rank; 0: no limit (train/config/memory_plan.hpp)
};

}  // namespace trellis
