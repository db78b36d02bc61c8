// The Hugging Face bridge end to end, without transformers: a decoder's weights file exported
// as a Hugging Face folder (export --format hf) and imported back (trellis import) holds the
// same parameters and configuration, for GPT-2 and for a Llama with grouped-query attention;
// a folder that does not match its config.json is refused by file and tensor; and init.weights'
// check of the run's model.* keys against the file's.
#include "trellis/core/error.hpp"
#include "trellis/core/host_copy.hpp"
#include "trellis/kernels/attention/qkv_layout.hpp"
#include "trellis/train/commands/export_command.hpp"
#include "trellis/train/commands/import_command.hpp"
#include "trellis/train/commands/saved_model.hpp"
#include "trellis/train/files/weights_file.hpp"
#include "trellis/train/hf/hf_folder.hpp"
#include "trellis/train/loop/initial_weights.hpp"

#include "catch.hpp"
#include "unit/support/data_helpers.hpp"
#include "unit/support/nn_helpers.hpp"
#include "unit/support/text_helpers.hpp"

#include <fstream>
#include <map>
#include <string>
#include <vector>

using namespace trellis;
using test::contains;
using test::message_of;

namespace {

TrainConfig config_of(const std::vector<std::string>& keys) {
  TrainConfig c = TrainConfig::from(RawConfig::parse("", keys));
  c.derived.vocab = c.model.vocab;
  return c;
}

const std::vector<std::string> kLlama = {
    "--model.type=llama",  "--model.n_layer=2",  "--model.n_head=4",
    "--model.n_kv_head=2", "--model.d_model=32", "--model.d_ff=48",
    "--model.seq_len=16",  "--model.vocab=40",   "--model.rope_theta=500000"};
const std::vector<std::string> kGpt2 = {"--model.type=gpt",   "--model.n_layer=2",
                                        "--model.n_head=4",   "--model.d_model=32",
                                        "--model.seq_len=16", "--model.vocab=40"};

DataShape shape_of(const TrainConfig& c) {
  DataShape s;
  s.classes = c.model.vocab;
  s.seq_len = c.model.seq_len;
  return s;
}

// A weights file of `config`'s model with every parameter distinct (no zero biases or unit
// norm weights, which a swapped tensor would not disturb); returns the values by name.
std::map<std::string, std::vector<float>> write_model(const TrainConfig& config,
                                                      const std::string& path) {
  SavedModel m;
  build_saved_model(m, config, shape_of(config), 1);
  std::map<std::string, std::vector<float>> values;
  std::vector<TensorPiece> pieces;
  for (std::size_t i = 0; i < m.store.size(); ++i) {
    const nn::ParamInfo& info = m.store.info(i);
    values[info.name] = test::random_values(info.numel, 100 + i);
    copy_from_host(values[info.name], m.store.param(i));
    TensorPiece piece;
    piece.name = "params/" + info.name;
    piece.logical_shape = info.logical_shape;
    piece.writer = true;
    piece.local = m.store.param(i);
    pieces.push_back(std::move(piece));
  }
  write_weights_file(path, pieces, config.to_ini(), MPI_COMM_SELF);
  return values;
}

std::map<std::string, std::vector<float>> read_model(const std::string& path) {
  const TrainConfig config = saved_config(path);
  SavedModel m;
  open_saved_model(m, path, config, shape_of(config), 1);
  std::map<std::string, std::vector<float>> values;
  for (std::size_t i = 0; i < m.store.size(); ++i)
    values[m.store.info(i).name] = to_host_vector(m.store.param(i));
  return values;
}

void export_folder(const std::string& weights, const std::string& out, Precision dtype,
                   double shard_mb) {
  ExportOptions options;
  options.weights = weights, options.out = out, options.format = "hf";
  options.dtype = dtype, options.shard_mb = shard_mb;
  export_hf(options, Logger(1));
}

void import_folder(const std::string& dir, const std::string& out) {
  import_hf(ImportOptions{dir, out}, Logger(1));
}

}  // namespace

TEST_CASE("hf bridge: export then import gives the same parameters (GPT-2, Llama with GQA)",
          "[hf]") {
  const std::string dir = testing::fresh_test_dir("hf_bridge_round_trip");
  for (const auto* keys : {&kGpt2, &kLlama}) {
    const TrainConfig config = config_of(*keys);
    const std::string name = model_type_name(config.model.type);
    const auto values = write_model(config, dir + "/" + name + ".h5");
    // 0.02 MiB shards: the Llama's 40 x 32 tables and blocks spread over several files.
    export_folder(dir + "/" + name + ".h5", dir + "/" + name + "-hf", Precision::fp32, 0.02);
    import_folder(dir + "/" + name + "-hf", dir + "/" + name + "-back.h5");
    CHECK(read_model(dir + "/" + name + "-back.h5") == values);
    const TrainConfig back = saved_config(dir + "/" + name + "-back.h5");
    // The imported file names every option explicitly; resolved, they are the original's.
    CHECK(check_initial_weights(back, config, "x").empty());
    CHECK(back.model.type == config.model.type);
    if (config.model.type == ModelType::llama) {
      CHECK(HfTensorFolder(dir + "/llama-hf").files() > 1);
      CHECK(back.model.rope_theta == 500000.0);
    }
  }
  // The exported q_proj of head 3 is the c_attn rows QkvLayout puts it at (grouped: head 3 is
  // the second query of kv group 1).
  const auto values = read_model(dir + "/llama-back.h5");
  const std::vector<float>& c_attn = values.at("h.0.attn.c_attn.weight");
  const std::vector<float> q =
      HfTensorFolder(dir + "/llama-hf").read("model.layers.0.self_attn.q_proj.weight");
  const kernels::QkvLayout layout{4, 2, 8};
  for (std::size_t e = 0; e < 8 * 32; ++e)
    REQUIRE(q[3 * 8 * 32 + e] == c_attn[static_cast<std::size_t>(layout.q_col(3)) * 32 + e]);
}

TEST_CASE("hf bridge: a bf16 export imports as the bf16-rounded parameters", "[hf]") {
  const std::string dir = testing::fresh_test_dir("hf_bridge_bf16");
  const auto values = write_model(config_of(kLlama), dir + "/m.h5");
  export_folder(dir + "/m.h5", dir + "/hf", Precision::bf16, 5000);
  CHECK(contains(test::read_all(dir + "/hf/config.json"), "\"torch_dtype\": \"bfloat16\""));
  CHECK(HfTensorFolder(dir + "/hf").find("lm_head.weight")->dtype == "BF16");
  import_folder(dir + "/hf", dir + "/back.h5");
  const auto back = read_model(dir + "/back.h5");
  for (const auto& [name, v] : values)
    for (std::size_t i = 0; i < v.size(); ++i)
      REQUIRE(back.at(name)[i] == round_to(Precision::bf16, v[i]));
}

TEST_CASE("hf bridge: a folder that does not match its config.json is refused by name", "[hf]") {
  const std::string dir = testing::fresh_test_dir("hf_bridge_errors");
  write_model(config_of(kLlama), dir + "/m.h5");
  export_folder(dir + "/m.h5", dir + "/hf", Precision::fp32, 5000);
  auto import_error = [&] {
    return message_of<InputError>([&] { import_folder(dir + "/hf", dir + "/x.h5"); }, "(none)");
  };
  const std::string config = test::read_all(dir + "/hf/config.json");
  auto with_config = [&](const std::string& from, const std::string& to) {
    std::string text = config;
    text.replace(text.find(from), from.size(), to);
    std::ofstream(dir + "/hf/config.json") << text;
  };
  // config.json implies a wider MLP than the tensors hold.
  with_config("\"intermediate_size\": 48", "\"intermediate_size\": 64");
  std::string e = import_error();
  CHECK(contains(e,
                 "hf/model.safetensors: tensor 'model.layers.0.mlp.gate_proj.weight' has "
                 "shape [48, 32], config.json implies [64, 32]"));
  // ... a tied head (lm_head.weight is left over and differs from the table).
  with_config("\"tie_word_embeddings\": false", "\"tie_word_embeddings\": true");
  CHECK(
      contains(import_error(), "tensor 'lm_head.weight' differs from 'model.embed_tokens.weight'"));
  // ... more layers than the folder has.
  with_config("\"num_hidden_layers\": 2", "\"num_hidden_layers\": 3");
  CHECK(contains(import_error(),
                 "tensors missing (the model config.json describes needs them): "
                 "model.layers.2.input_layernorm.weight"));
  // ... fewer: the last layer's tensors are left over.
  with_config("\"num_hidden_layers\": 2", "\"num_hidden_layers\": 1");
  CHECK(contains(import_error(),
                 "tensors left over (the model config.json describes has no place for "
                 "them): "
                 "model.layers.1."));
  // A model_type Trellis does not have.
  with_config("\"model_type\": \"llama\"", "\"model_type\": \"qwen2\"");
  CHECK(contains(import_error(), "config.json: model_type = \"qwen2\""));
  // Nothing was left behind under the output name.
  CHECK_FALSE(std::ifstream(dir + "/x.h5").good());

  // An mlp has no Hugging Face form; a GPT-2 without biases is named.
  write_weights_file(dir + "/mlp.h5", {}, config_of({"--model.type=mlp"}).to_ini(), MPI_COMM_SELF);
  CHECK(contains(message_of<ConfigError>(
                     [&] { export_folder(dir + "/mlp.h5", dir + "/mlp-hf", Precision::fp32, 1); }),
                 "model.type = mlp"));
  std::vector<std::string> nobias = kGpt2;
  nobias.push_back("--model.bias=false");
  write_model(config_of(nobias), dir + "/nobias.h5");
  CHECK(contains(message_of<ConfigError>([&] {
                   export_folder(dir + "/nobias.h5", dir + "/nobias-hf", Precision::fp32, 1);
                 }),
                 "model.bias = false"));
}

TEST_CASE("init.weights: the run's model keys must describe the file's model", "[hf][config]") {
  const TrainConfig stored = config_of(kLlama);
  // The same model with its options explicit, on type gpt: equal once resolved.
  std::vector<std::string> explicit_keys = kLlama;
  explicit_keys[0] = "--model.type=gpt";
  for (const char* k : {"--model.positions=rope", "--model.norm=rmsnorm", "--model.mlp=swiglu",
                        "--model.bias=false", "--model.tied_head=false"})
    explicit_keys.push_back(k);
  CHECK(check_initial_weights(stored, config_of(explicit_keys), "m.h5").empty());
  // Free keys differ: noted; the run uses its own.
  std::vector<std::string> tuned = kLlama;
  tuned.push_back("--model.dropout=0.1");
  tuned.push_back("--model.seq_len=64");  // rotary positions: no table to resize
  const std::vector<std::string> notes = check_initial_weights(stored, config_of(tuned), "m.h5");
  REQUIRE(notes.size() == 2);
  CHECK(contains(notes[0] + notes[1], "model.seq_len = 16 there, 64 here"));
  // Shapes differ: refused by key.
  std::vector<std::string> wider = kLlama;
  wider.push_back("--model.d_ff=64");
  CHECK(contains(
      message_of<ConfigError>([&] { check_initial_weights(stored, config_of(wider), "m.h5"); }),
      "init.weights = m.h5: model.d_ff = 48 there, 64 here"));
  CHECK(contains(message_of<ConfigError>([&] {
                   check_initial_weights(stored, config_of({"--model.type=mlp"}), "m.h5");
                 }),
                 "model.type = llama there, mlp here"));
  // A GPT-2's learned position table fixes seq_len.
  std::vector<std::string> longer = kGpt2;
  longer.push_back("--model.seq_len=32");
  CHECK(contains(message_of<ConfigError>(
                     [&] { check_initial_weights(config_of(kGpt2), config_of(longer), "m.h5"); }),
                 "model.seq_len = 16 there, 32 here"));
}
