// The memory plan: what one rank of a configuration and process grid will hold, category by
// category (core/memory_ledger.hpp's), before anything is allocated. `trellis info` prints it;
// `trellis train` refuses at start-up, with memory.limit_gb, a layout that would not fit.
//
// It is made from the sizes the code allocates, not from a formula of its own:
//  - the rank's model (each pipeline stage's, times the micro-batches it holds in flight, with
//    its tensor-parallel slice, recomputation and autocast operands) and the pipeline's
//    transfer and loss buffers are built under an nn::BufferCensus: every activation,
//    workspace and recompute buffer is counted at its real size and none is allocated (an 8B
//    model plans on a laptop). The parameter buffer's size is the store's own, padded as
//    training pads it.
//  - from that size: parameters and gradients (4 bytes each), the optimizer's buffers
//    (optimizer_state_buffers(), over the ZeRO-1 shard), ZeRO-1's reduced gradient shard
//    (communicator exchange), the 16-bit weight copy, the decay and norm masks (a byte
//    each, their shards with ZeRO-1), a 16-bit gradient wire; the batch buffers (the loader's
//    and the prefetch ring's) and the start-up GEMM measurement's three 512 x 512 matrices.
// Every figure is the category's peak, which is its steady size: the buffers are allocated once
// at start-up. e2e.memory_plan checks the plan against the ledger's measured peaks.
// Not included: PowerSGD's factors, library workspaces found at run time (cuDNN, Kokkos' team
// scratch: the ledger counts both as workspace), memory outside the kernels' memory space.
#pragma once

#include "trellis/core/memory_ledger.hpp"
#include "trellis/data/data_shape.hpp"
#include "trellis/train/config/train_config.hpp"

#include <array>
#include <cstdint>
#include <string>

namespace trellis {

struct PlannedGrid {
  int dp = 1, tp = 1, pp = 1;
  bool shared_exchange = false;  // dp gradients summed in node shared memory (training_model)
};

struct MemoryPlan {
  std::array<std::int64_t, kMemoryCategories> bytes{};  // one rank's peak per category
  int stage = 0;  // the pipeline stage whose ranks need the most
  std::int64_t total() const;
};

// The rank of the stage that needs the most. config: resolve_batch(grid.dp) done.
MemoryPlan plan_memory(const TrainConfig& config, const DataShape& data, const PlannedGrid& grid);

// "activations 1.2 GiB, parameters 300 MiB, ..." (largest first, empty categories left out).
std::string describe_memory_plan(const MemoryPlan& plan);

// memory.limit_gb > 0 and the plan above it: ConfigError with the plan's categories and the
// keys that would shrink the largest ones (memory.recompute, parallel.zero, parallel.tp/pp,
// train.micro_batch).
void check_memory_limit(const TrainConfig& config, const MemoryPlan& plan, const PlannedGrid& grid);

}  // namespace trellis
