// A saved model opened over a process grid, for `trellis eval` and `generate` of a model
// larger than one rank: each rank builds only its tensor-parallel slice of its pipeline stage
// and, with ZeRO-3, keeps only its shard of every block (gathered block by block as the
// forward reaches it, parallel/unit_exchange.hpp); each rank reads only its pieces of the
// weights file. It is the TrainingModel a run builds on that layout, so what trains on a
// layout evaluates on it; without optimizer state (plain SGD) and in fp32.
#pragma once

#include "trellis/comm/process_grid.hpp"
#include "trellis/core/log.hpp"
#include "trellis/data/data_shape.hpp"
#include "trellis/train/config/train_config.hpp"
#include "trellis/train/loop/training_model.hpp"

#include <cstdint>
#include <memory>
#include <string>

namespace trellis {

// The layout options of eval and generate (--tp, --pp, --zero, --memory-limit-gb).
struct ModelLayout {
  int tp = 1, pp = 1, zero = 0;
  double memory_limit_gb = 0;  // > 0: the memory plan must fit (memory.limit_gb)
  // Built as a run builds it (ShardedModel) rather than whole on each rank: spread over the
  // ranks, or planned against a limit.
  bool on_grid() const { return tp > 1 || pp > 1 || zero > 0 || memory_limit_gb > 0; }
};

class ShardedModel {
 public:
  // Collective over the grid (made with the layout's tp and pp); failures agreed (every rank
  // throws). `path`: an fp32 weights file; capacity: the most samples one forward sees.
  ShardedModel(const ProcessGrid& grid, const std::string& path, const DataShape& shape,
               std::int64_t capacity, const ModelLayout& layout, const Logger& log);

  const TrainConfig& config() const { return config_; }
  TrainingModel& model() { return *model_; }

 private:
  TrainConfig config_;
  std::unique_ptr<TrainingModel> model_;
};

// The stored configuration of `path` with the layout's keys, for a model that only runs
// forward: sgd without momentum (no optimizer state), fp32, no recomputation, no pruning,
// `capacity` samples per forward on each of the world's dp ranks.
TrainConfig layout_config(const std::string& path, const ModelLayout& layout, int world_size,
                          std::int64_t capacity);

}  // namespace trellis
