#include "trellis/train/commands/import_command.hpp"

#include "trellis/comm/agreement.hpp"
#include "trellis/comm/mpi_check.hpp"
#include "trellis/core/error.hpp"
#include "trellis/core/format.hpp"
#include "trellis/core/host_copy.hpp"
#include "trellis/nn/gpt.hpp"
#include "trellis/train/commands/command.hpp"
#include "trellis/train/commands/saved_model.hpp"
#include "trellis/train/config/config_table.hpp"
#include "trellis/train/config/raw_config.hpp"
#include "trellis/train/files/weights_file.hpp"
#include "trellis/train/hf/hf_config.hpp"
#include "trellis/train/hf/hf_folder.hpp"
#include "trellis/train/hf/hf_names.hpp"
#include "trellis/train/model/model_registry.hpp"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

namespace trellis {

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open (a Hugging Face model folder has config.json)");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The default configuration with config.json's model keys, parsed back from its INI text as
// `trellis eval` will parse it, so that a model Trellis cannot build fails here.
TrainConfig config_for(const HfModelConfig& hf, const std::string& config_path) {
  TrainConfig config = TrainConfig::from(RawConfig::parse("", {}));
  config.model = hf.model;
  config.derived.vocab = hf.model.vocab;
  config.source = "trellis import --hf";
  try {
    return TrainConfig::from(RawConfig::parse_text(config.to_ini(), config_path, {}));
  } catch (const ConfigError& e) {
    throw InputError(config_path + ": Trellis cannot build this model: " + e.what());
  }
}

// Buffers transformers keeps in some checkpoints and recomputes itself: nothing to import.
bool recomputed_buffer(const std::string& name) {
  for (const char* suffix : {"rotary_emb.inv_freq", ".attn.bias", ".attn.masked_bias"})
    if (name.size() >= std::string(suffix).size() &&
        name.compare(name.size() - std::string(suffix).size(), std::string::npos, suffix) == 0)
      return true;
  return false;
}

std::string name_list(const std::vector<std::string>& names) {
  std::string text;
  for (std::size_t i = 0; i < names.size() && i < 8; ++i) text += (i ? ", " : "") + names[i];
  if (names.size() > 8) text += format_text(", ... (%zu in all)", names.size());
  return text;
}

// Fills every parameter of `store` from the folder's tensors by the mapping; returns notes.
std::vector<std::string> fill_parameters(const HfTensorFolder& folder, HfArch arch,
                                         const std::vector<HfMapping>& mappings,
                                         nn::ParameterStore& store) {
  // A folder saved from the base model (GPT2Model, LlamaModel) names tensors without prefix.
  const std::string prefix = hf_base_prefix(arch);
  const std::string& probe = mappings.front().parts.front().name;
  const bool bare =
      folder.find(probe) == nullptr && folder.find(probe.substr(prefix.size())) != nullptr;
  auto stored_name = [&](const std::string& name) {
    return bare && name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
  };
  std::set<std::string> used;
  std::vector<std::string> missing;
  for (const HfMapping& m : mappings)
    for (const HfPart& part : m.parts) {
      const std::string name = stored_name(part.name);
      const SafetensorsEntry* entry = folder.find(name);
      if (entry == nullptr) {
        missing.push_back(name);
        continue;
      }
      if (entry->shape != part.shape)
        throw InputError(folder.file_of(name) + ": tensor '" + name + "' has shape " +
                         shape_string(entry->shape) + ", config.json implies " +
                         shape_string(part.shape));
      used.insert(name);
    }
  if (!missing.empty())
    throw InputError(
        folder.dir() +
        ": tensors missing (the model config.json describes needs them): " + name_list(missing));
  std::vector<std::string> notes, extra, ignored;
  for (const std::string& name : folder.names()) {
    if (used.count(name)) continue;
    if (recomputed_buffer(name))
      ignored.push_back(name + " (recomputed by transformers)");
    else
      extra.push_back(name);
  }
  // A tied head saved anyway must be the token table itself.
  const std::string head = "lm_head.weight", table = stored_name(mappings.front().parts[0].name);
  if (std::find(extra.begin(), extra.end(), head) != extra.end() &&
      store.find(head) == std::nullopt) {
    if (folder.read(head) != folder.read(table))
      throw InputError(folder.file_of(head) + ": tensor 'lm_head.weight' differs from '" + table +
                       "', but config.json ties the head to it (tie_word_embeddings)");
    extra.erase(std::find(extra.begin(), extra.end(), head));
    ignored.push_back(head + " (equal to " + table + ": tied)");
  }
  if (!extra.empty())
    throw InputError(
        folder.dir() +
        ": tensors left over (the model config.json describes has no place for them): " +
        name_list(extra));
  if (!ignored.empty()) notes.push_back("ignored: " + name_list(ignored));
  for (const HfMapping& m : mappings) {
    std::vector<std::vector<float>> parts;
    for (const HfPart& part : m.parts) parts.push_back(folder.read(stored_name(part.name)));
    copy_from_host(join_from_hf(m, parts), store.param(store.index(m.param)));
  }
  return notes;
}

// The --model.* overrides a training run starting from the file (init.weights) needs: each key
// whose value, with the overrides before it, would otherwise resolve to something else (the
// keys are in dependency order: d_model before the d_ff it resolves).
std::string model_overrides(const TrainConfig& config) {
  const ModelRegistration& model = model_registration(config.model.type);
  auto resolved = [&](TrainConfig c) {
    if (model.resolved) c.model = model.resolved(c.model);
    return c;
  };
  const TrainConfig target = resolved(config);
  std::vector<std::string> overrides = {"--model.type=" + std::string(model.name)};
  for (const char* key : model.config_keys) {
    const ConfigEntry* entry = find_config_entry(key);
    if (entry == nullptr) continue;
    const TrainConfig given = resolved(TrainConfig::from(RawConfig::parse("", overrides)));
    if (entry->format(given) != entry->format(target))
      overrides.push_back("--" + std::string(key) + "=" + entry->format(config));
  }
  std::string text;
  for (const std::string& o : overrides) text += (text.empty() ? "" : " ") + o;
  return text;
}

}  // namespace

void import_hf(const ImportOptions& options, const Logger& log) {
  const std::string config_path = options.hf_dir + "/config.json";
  const HfModelConfig hf = hf_model_config(read_text(config_path), config_path,
                                           TrainConfig::from(RawConfig::parse("", {})).model);
  TrainConfig config = config_for(hf, config_path);
  DataShape shape;
  shape.classes = config.model.vocab;
  shape.seq_len = config.model.seq_len;
  SavedModel saved;
  build_saved_model(saved, config, shape, 1);
  const auto* gpt = dynamic_cast<const nn::Gpt*>(saved.model.get());
  if (gpt == nullptr) throw Error("import: the registry built no decoder for " + config_path);
  const HfTensorFolder folder(options.hf_dir);
  std::vector<std::string> notes = hf.notes;
  for (const std::string& note :
       fill_parameters(folder, hf.arch, hf_mappings(gpt->spec(), hf.arch), saved.store))
    notes.push_back(note);

  std::vector<TensorPiece> pieces;
  std::int64_t numel = 0;
  for (std::size_t i = 0; i < saved.store.size(); ++i) {
    TensorPiece piece;
    piece.name = "params/" + saved.store.info(i).name;
    piece.logical_shape = saved.store.info(i).logical_shape;
    piece.writer = true;
    piece.local = saved.store.param(i);
    numel += shape_numel(piece.logical_shape);
    pieces.push_back(std::move(piece));
  }
  // The folder's tokenizer, when it has one, goes with the model (generate reads it).
  std::string tokenizer;
  const std::string tokenizer_path = options.hf_dir + "/tokenizer.json";
  if (std::ifstream(tokenizer_path).good()) {
    tokenizer = read_text(tokenizer_path);
    notes.push_back("tokenizer.json kept in the weights file");
  }
  write_weights_file(options.out, pieces, config.to_ini(), MPI_COMM_SELF, Hdf5Tuning{}, tokenizer);
  for (const std::string& note : notes) log.info("import: note: " + note);
  log.info(format_text("import: %s (%s, %zu tensor file(s)) -> %s: %s, %lld parameters",
                       options.hf_dir.c_str(), hf_architecture(hf.arch), folder.files(),
                       options.out.c_str(), gpt->describe().c_str(),
                       static_cast<long long>(numel)));
  log.info("import: to train from it: trellis train --init.weights " + options.out + " " +
           model_overrides(config) + " ...");
}

void import_command(MPI_Comm world, const ImportOptions& options, const Logger& log) {
  int rank = 0;
  TRELLIS_MPI(MPI_Comm_rank(world, &rank));
  run_agreed(world, log, [&] {
    if (rank == 0) import_hf(options, log);
  });
}

int run_import_command(const CommandContext& context, const CommandArgs& args) {
  ImportOptions options;
  options.hf_dir = args.text("--hf");
  options.out = args.text("--out");
  import_command(context.world, options, context.log);
  return 0;
}

}  // namespace trellis
