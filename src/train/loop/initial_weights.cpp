#include "trellis/train/loop/initial_weights.hpp"

#include "trellis/core/error.hpp"
#include "trellis/train/config/config_table.hpp"
#include "trellis/train/model/model_registry.hpp"

namespace trellis {

namespace {

// A copy of `config` whose model section is resolved by its type, vocab as the run resolved it.
TrainConfig resolved(const TrainConfig& config) {
  TrainConfig out = config;
  if (out.derived.vocab > 0) out.model.vocab = out.derived.vocab;
  const ModelRegistration& model = model_registration(out.model.type);
  if (model.resolved) out.model = model.resolved(out.model);
  return out;
}

// Keys whose values change how the parameters are used, not which parameters there are or
// what each holds.
bool free_key(const std::string& key, const TrainConfig& config) {
  if (key == "model.seq_len") return config.model.positions == "rope";
  return key == "model.dropout" || key == "model.init" || key == "model.sync_bn" ||
         key == "model.norm_eps" || key.rfind("model.rope_", 0) == 0 ||
         key.rfind("kernels.", 0) == 0;
}

}  // namespace

std::vector<std::string> check_initial_weights(const TrainConfig& stored_config,
                                               const TrainConfig& current_config,
                                               const std::string& path) {
  const TrainConfig stored = resolved(stored_config), current = resolved(current_config);
  const ModelRegistration& here = model_registration(current.model.type);
  const ModelRegistration& there = model_registration(stored.model.type);
  const std::string prefix = "init.weights = " + path + ": ";
  if (here.config_keys != there.config_keys)
    throw ConfigError(prefix + "model.type = " + there.name + " there, " + here.name +
                      " here (the run's model.* keys must describe the file's model)");
  std::vector<std::string> notes;
  for (const char* key : here.config_keys) {
    const ConfigEntry* entry = find_config_entry(key);
    if (entry == nullptr) continue;
    const std::string a = entry->format(stored), b = entry->format(current);
    if (a == b) continue;
    if (!free_key(key, current))
      throw ConfigError(prefix + key + " = " + a + " there, " + b +
                        " here (the run's model.* keys must describe the file's model)");
    notes.push_back(prefix + key + " = " + a + " there, " + b + " here: the run uses " + b);
  }
  return notes;
}

}  // namespace trellis
