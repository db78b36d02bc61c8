// `trellis export --format hf` (export_command.hpp): a decoder's weights file as a Hugging
// Face model folder. The model is rebuilt from the file the one way every command does
// (saved_model.hpp), so its nn::Gpt spec has every "auto" option resolved; train/hf/ maps the
// spec to config.json and each parameter to its transformers tensors.
#include "trellis/core/durable_file.hpp"
#include "trellis/core/error.hpp"
#include "trellis/core/format.hpp"
#include "trellis/core/host_copy.hpp"
#include "trellis/data/tokenizer_blob.hpp"
#include "trellis/nn/gpt.hpp"
#include "trellis/train/commands/export_command.hpp"
#include "trellis/train/commands/saved_model.hpp"
#include "trellis/train/files/int8_weights.hpp"
#include "trellis/train/hf/hf_config.hpp"
#include "trellis/train/hf/hf_folder.hpp"
#include "trellis/train/hf/hf_names.hpp"
#include "trellis/train/model/model_registry.hpp"

#include <cmath>
#include <filesystem>

namespace trellis {

namespace {

// The transformers tensors of every parameter; Error when the model holds a parameter the
// mapping does not know (a new option without its mapping), so none is silently dropped.
std::vector<HfTensor> hf_tensors(const nn::ParameterStore& store,
                                 const std::vector<HfMapping>& mappings) {
  if (mappings.size() != store.size())
    throw Error(format_text("export --format hf: the model has %zu parameters, the mapping %zu",
                            store.size(), mappings.size()));
  std::vector<HfTensor> out;
  for (const HfMapping& m : mappings) {
    const std::size_t i = store.index(m.param);
    if (store.info(i).logical_shape != m.shape)
      throw Error("export --format hf: " + m.param + " is " +
                  shape_string(store.info(i).logical_shape) + ", the mapping expects " +
                  shape_string(m.shape));
    std::vector<std::vector<float>> parts = split_to_hf(m, to_host_vector(store.param(i)));
    for (std::size_t p = 0; p < parts.size(); ++p)
      out.push_back({m.parts[p].name, m.parts[p].shape, std::move(parts[p])});
  }
  return out;
}

}  // namespace

void export_hf(const ExportOptions& options, const Logger& log) {
  if (!(options.shard_mb > 0) || !std::isfinite(options.shard_mb))
    throw ConfigError(
        format_text("export: --shard-mb %g: expected a positive size in MiB", options.shard_mb));
  if (is_int8_weights(options.weights))
    throw ConfigError(options.weights +
                      " is an int8 model; export --format hf takes the fp32 weights (model.h5)");
  const TrainConfig config = saved_config(options.weights);
  if (model_registration(config.model.type).data != DataKind::tokens)
    throw ConfigError(options.weights + ": model.type = " + model_type_name(config.model.type) +
                      "; export --format hf writes the decoders (model.type gpt or llama)");
  DataShape shape;
  shape.classes = config.model.vocab;
  shape.seq_len = config.model.seq_len;
  SavedModel saved;
  open_saved_model(saved, options.weights, config, shape, 1);
  const auto* gpt = dynamic_cast<const nn::Gpt*>(saved.model.get());
  if (gpt == nullptr)
    throw ConfigError(options.weights + ": export --format hf needs the decoder model (nn::Gpt)");
  const nn::GptSpec& spec = gpt->spec();
  const HfArch arch = hf_arch_for(spec, config.model.type);
  const std::vector<HfTensor> tensors = hf_tensors(saved.store, hf_mappings(spec, arch));

  // The folder is built beside its final name and renamed into place once complete.
  const std::string tmp = options.out + ".tmp";
  remove_tree(tmp);
  std::filesystem::create_directories(tmp);
  const auto shard_bytes = static_cast<std::uint64_t>(options.shard_mb * 1024 * 1024);
  std::vector<std::string> files = write_hf_tensors(tmp, tensors, options.dtype, shard_bytes);
  write_file_durably(tmp + "/config.json", hf_config_json(spec, arch, options.dtype));
  files.insert(files.begin(), "config.json");
  // The tokenizer a BPE-trained model keeps: tokenizer.json as it is, and the config that lets
  // AutoTokenizer.from_pretrained find it (its end-of-text token as eos).
  const std::string tokenizer = read_tokenizer_json(options.weights);
  if (!tokenizer.empty()) {
    write_file_durably(tmp + "/tokenizer.json", tokenizer);
    write_file_durably(tmp + "/tokenizer_config.json",
                       hf_tokenizer_config_json(tokenizer, spec.seq_len));
    files.push_back("tokenizer.json");
    files.push_back("tokenizer_config.json");
  }
  publish_by_rename(tmp, options.out);

  std::int64_t numel = 0;
  for (const HfTensor& t : tensors) numel += shape_numel(t.shape);
  std::string list;
  for (const std::string& f : files) list += (list.empty() ? "" : ", ") + f;
  log.info(format_text("export: %s (%s) -> %s: %s, %zu tensors, %lld parameters in %s; %s",
                       options.weights.c_str(), gpt->describe().c_str(), options.out.c_str(),
                       hf_architecture(arch), tensors.size(), static_cast<long long>(numel),
                       precision_name(options.dtype), list.c_str()));
}

}  // namespace trellis
