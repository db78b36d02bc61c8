// What the GradientSync MPI tests share: a small Mlp in a store padded for the dp size, whose
// ranks each see different data, its reduction step, and independent references (a second
// copy of the model without the sync, reduced with a plain MPI_Allreduce).
#pragma once

#include "unit/support/nn_helpers.hpp"

#include "trellis/kernels/random_fill.hpp"
#include "trellis/nn/mlp.hpp"
#include "trellis/parallel/gradient_sync.hpp"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

namespace trellis::gradient_sync_test {

using trellis::test::to_host;

inline constexpr int kInputs = 20;
inline constexpr int kClasses = 5;
inline constexpr int kRows = 8;  // rows per micro-batch (the model's capacity)
inline constexpr int kMicroBatches = 2;

inline int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

inline nn::MlpSpec mlp_spec() {
  nn::MlpSpec spec;
  spec.input_dim = kInputs;
  spec.hidden = {33, 17};
  spec.classes = kClasses;
  spec.capacity = kRows;
  spec.dropout = 0.0f;
  return spec;
}

// dlogits = 0.1 logits - 0.05 class: depends on the parameters, so optimizer steps matter.
inline void fixed_dlogits(ConstMatrix logits, Matrix dlogits) {
  const int cols = static_cast<int>(logits.extent(1));
  Kokkos::parallel_for(
      "test::dlogits", Kokkos::RangePolicy<ExecSpace>(0, static_cast<int>(logits.size())),
      KOKKOS_LAMBDA(int e) {
        const int i = e / cols, j = e % cols;
        dlogits(i, j) = 0.1f * logits(i, j) - 0.05f * static_cast<float>(j);
      });
}

// A model in a store padded for the dp size, with its input and dlogits buffers.
struct Net {
  nn::ParameterStore store;
  std::unique_ptr<nn::Mlp> mlp;
  FloatView input{"test::input", std::size_t{kRows} * kInputs};
  FloatView dlogits{"test::dlogits", std::size_t{kRows} * kClasses};
  bool simulate_progress = false;  // report grads_final_from here (the model does not)

  explicit Net(int dp_size, bool finalize = true) {
    mlp = std::make_unique<nn::Mlp>(mlp_spec(), store);
    store.pad_to_multiple(GradientSync::padding_multiple(dp_size));
    if (finalize) store.finalize(2024);
  }

  // Forward + backward of micro-batch k of `step` on this rank's own data.
  void micro_batch(int step, int k) {
    const auto stream = static_cast<std::uint64_t>(1000 * world_rank() + 10 * step + k);
    kernels::fill_uniform(input, -1.0f, 1.0f, 99, stream);
    nn::StepContext ctx;
    ctx.step = step;
    ConstMatrix logits = mlp->forward(as_matrix(input, kRows, kInputs), kRows, ctx);
    Matrix dl = as_matrix(dlogits, kRows, kClasses);
    fixed_dlogits(logits, dl);
    mlp->backward(dl, kRows);
    if (simulate_progress) {
      // What a model's backward reports: parameters in reverse registration order.
      for (std::size_t i = store.size(); i-- > 0;) store.grads_final_from(store.info(i).offset);
    }
  }
};

// Whether Mlp::backward itself reports its progress through store.grads_final_from().
inline bool model_reports_progress() {
  struct Counter : nn::GradReadyListener {
    int calls = 0;
    void grads_final_from(std::size_t) override { ++calls; }
  } counter;
  Net net(1);
  net.store.set_grad_listener(&counter);
  net.micro_batch(0, 0);
  net.store.set_grad_listener(nullptr);
  return counter.calls > 0;
}

// One step's gradients: zero, kMicroBatches micro-batches (the last one armed unless
// arm_last is false), finish_reduction().
inline void reduce_step(Net& net, GradientSync& sync, int step, bool arm_last = true) {
  net.store.zero_grads();
  for (int k = 0; k < kMicroBatches; ++k) {
    sync.begin_backward(arm_last && k == kMicroBatches - 1);
    net.micro_batch(step, k);
  }
  sync.finish_reduction();
}

// The local gradients of `step` (no sync) summed over the world with a plain MPI_Allreduce.
inline std::vector<float> reference_grads(int dp_size, int step,
                                          int micro_batches = kMicroBatches) {
  Net ref(dp_size);
  ref.store.zero_grads();
  for (int k = 0; k < micro_batches; ++k) ref.micro_batch(step, k);
  std::vector<float> grads = to_host(ref.store.grads());
  MPI_Allreduce(MPI_IN_PLACE, grads.data(), static_cast<int>(grads.size()), MPI_FLOAT, MPI_SUM,
                MPI_COMM_WORLD);
  return grads;
}

// max |a - b| / max |b| (sums in another order differ in the last bits); 1 for a size mismatch.
inline double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 1.0;
  double scale = 0.0, worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
    worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  }
  return scale > 0.0 ? worst / scale : worst;
}

// This rank's shard elements of a full-buffer host vector, as GradientSync lays them out.
inline std::vector<float> shard_of(const GradientSync& sync, const std::vector<float>& full) {
  std::vector<float> shard(sync.update_size());
  for (const GradientSync::ShardRange& r : sync.shard_ranges())
    std::copy(full.begin() + static_cast<std::ptrdiff_t>(r.flat_begin),
              full.begin() + static_cast<std::ptrdiff_t>(r.flat_end),
              shard.begin() + static_cast<std::ptrdiff_t>(r.shard_offset));
  return shard;
}

}  // namespace trellis::gradient_sync_test
