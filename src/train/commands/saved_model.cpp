#include "trellis/train/commands/saved_model.hpp"

#include "trellis/train/config/raw_config.hpp"
#include "trellis/train/files/int8_weights.hpp"
#include "trellis/train/files/weights_file.hpp"
#include "trellis/train/model/model_registry.hpp"

namespace trellis {

TrainConfig saved_config(const std::string& path) {
  return TrainConfig::from(
      RawConfig::parse_text(read_weights_config(path), "the config stored in " + path, {}));
}

void build_saved_model(SavedModel& out, const TrainConfig& config, const DataShape& shape,
                       std::int64_t capacity) {
  out.model = build_model(config.model, config.kernels, shape, capacity, out.store, nullptr);
  out.store.finalize(config.train.seed);
}

void open_saved_model(SavedModel& out, const std::string& path, const TrainConfig& config,
                      const DataShape& shape, std::int64_t capacity) {
  build_saved_model(out, config, shape, capacity);
  out.int8 = read_int8_layers(path);
  load_weights(path, out.store, out.model->buffers(), int8_weight_names(out.int8));
  if (!out.int8.empty())
    out.model = int8_model(config.model.type, std::move(out.model), out.store, out.int8);
}

}  // namespace trellis
