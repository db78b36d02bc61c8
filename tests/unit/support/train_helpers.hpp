// Helpers of the training-loop tests (unit and MPI): a tiny mlp run's parts built as the trainer
// builds them, a fixed in-memory training set, and host copies of parameters and state.
#pragma once

#include "unit/support/nn_helpers.hpp"

#include "trellis/comm/process_grid.hpp"
#include "trellis/core/log.hpp"
#include "trellis/train/config/train_config.hpp"
#include "trellis/train/faults/fault_injector.hpp"
#include "trellis/train/input/data_source.hpp"
#include "trellis/train/loop/pruner.hpp"
#include "trellis/train/loop/training_model.hpp"

#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace trellis::test {

// Samples of 4 features in 3 classes: an mlp 4 -> 8 -> 3 (fc1.weight [8, 4], fc1.bias,
// head.weight [3, 8], head.bias).
inline DataShape tiny_shape() { return DataShape{{4}, 4, 3, 0}; }

inline int world_rank_of_run() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

// The parts of a run over MPI_COMM_WORLD (tp = pp = 1): defaults of the config table, then
// these keys, then `keys` (e.g. {"prune.method", "magnitude"}).
struct TinyRun {
  explicit TinyRun(const std::map<std::string, std::string>& keys = {},
                   std::int64_t total_steps = 10) {
    std::map<std::string, std::string> all = {{"model.hidden", "8"},
                                              {"train.global_batch", "4"},
                                              {"optim.type", "adam"},
                                              {"train.seed", "7"}};
    for (const auto& [key, value] : keys) all[key] = value;
    std::vector<std::string> args;
    for (const auto& [key, value] : all) args.push_back("--" + key + "=" + value);
    config = TrainConfig::from(RawConfig::parse("", args));
    grid = std::make_unique<ProcessGrid>(MPI_COMM_WORLD, 1, 1);
    config.resolve_batch(grid->size(Axis::dp));
    model = std::make_unique<TrainingModel>(config, tiny_shape(), *grid, config.micro_batch(),
                                            total_steps);
    faults = std::make_unique<FaultInjector>(config.fault, grid->rank(), log);
    pruner = std::make_unique<Pruner>(config.prune, total_steps, *grid, *model);
  }

  // Parameter `name` on the host, and set from the host.
  std::vector<float> param(const std::string& name) const {
    return to_host(model->store().param(model->store().index(name)));
  }
  void set_param(const std::string& name, const std::vector<float>& values) {
    Kokkos::deep_copy(model->store().param(model->store().index(name)), to_device(name, values));
  }
  // Optimizer state buffer `state` (e.g. "exp_avg") over parameter `name`.
  std::vector<float> state(const std::string& state, const std::string& name) const {
    const nn::ParamInfo& info = model->store().info(model->store().index(name));
    for (const auto& [state_name, view] : model->optimizer().state())
      if (state_name == state) return to_host(slice(view, info.offset, info.offset + info.numel));
    return {};
  }

  Logger log{world_rank_of_run()};
  TrainConfig config;
  std::unique_ptr<ProcessGrid> grid;
  std::unique_ptr<TrainingModel> model;
  std::unique_ptr<FaultInjector> faults;
  std::unique_ptr<Pruner> pruner;
};

// The same 4 samples for every global batch (this rank's block of them): features
// 0.25 (i + f + 1) - 1, labels i % 3.
class FixedSource : public TrainSource {
 public:
  explicit FixedSource(const ProcessGrid& grid) : dp_(grid.size(Axis::dp)), rank_(grid.rank()) {}
  DataShape shape() const override { return tiny_shape(); }
  std::int64_t steps_per_epoch() const override { return 1000; }
  LocalPart load(std::int64_t, std::int64_t, std::int64_t, BatchBuffers& buffers) override {
    const std::int64_t local = 4 / dp_, first = rank_ * local;
    for (std::int64_t i = 0; i < local; ++i) {
      for (std::int64_t f = 0; f < 4; ++f)
        buffers.host_features(static_cast<std::size_t>(i * 4 + f)) =
            0.25f * static_cast<float>(first + i + f + 1) - 1.0f;
      buffers.host_targets(static_cast<std::size_t>(i)) =
          static_cast<std::int32_t>((first + i) % 3);
    }
    return LocalPart{local, first, 4};
  }
  std::string describe() const override { return "4 fixed samples"; }

 private:
  std::int64_t dp_, rank_;
};

// The bits of each float: NaN equals NaN, -0 differs from 0.
inline std::vector<std::uint32_t> bits_of(const std::vector<float>& values) {
  std::vector<std::uint32_t> bits(values.size());
  if (!values.empty()) std::memcpy(bits.data(), values.data(), values.size() * sizeof(float));
  return bits;
}

}  // namespace trellis::test
