// GradientSync: bucketed data-parallel gradient reduction overlapped with backward, and ZeRO-1,
// on a small Mlp whose ranks each see different data, at whatever world size the test runs
// (dp = the world). References are computed independently (gradient_sync_test_util.hpp).
//
// Only CHECKs (never REQUIRE) after the first collective, so a failing rank still takes part
// in every later collective instead of leaving the others waiting.
#include "catch.hpp"
#include "mpi/gradient_sync_helpers.hpp"

#include "trellis/comm/process_grid.hpp"
#include "trellis/core/error.hpp"
#include "trellis/optim/clip.hpp"
#include "trellis/optim/optimizer.hpp"
#include "trellis/parallel/gradient_sync.hpp"

#include <mpi.h>

#include <algorithm>
#include <vector>

using namespace trellis;
using namespace trellis::gradient_sync_test;

TEST_CASE("GradientSync sums gradients over dp, overlapped with backward", "[dp_sync_mpi]") {
  ProcessGrid grid(MPI_COMM_WORLD, 1, 1);
  Communicator& dp = grid.communicator(Axis::dp);
  const bool model_reports = model_reports_progress();
  if (!model_reports) WARN("Mlp::backward does not call grads_final_from: the test reports it");
  const std::vector<float> expected = reference_grads(dp.size(), 0);

  // Bucket sizes: the smallest possible (one padding multiple each), a few hundred bytes
  // (not a multiple: rounded down), and one bucket for everything.
  for (std::size_t bucket_bytes : {std::size_t{1}, std::size_t{1000}, std::size_t{25} << 20}) {
    for (bool zero1 : {false, true}) {
      INFO("bucket_bytes " << bucket_bytes << ", zero1 " << zero1);
      std::vector<float> per_overlap[2];
      for (bool overlap : {false, true}) {
        INFO("overlap " << overlap);
        Net net(dp.size());
        net.simulate_progress = !model_reports;
        GradientSyncOptions options;
        options.bucket_bytes = bucket_bytes;
        options.overlap = overlap;
        options.zero = zero1;
        GradientSync sync(dp, net.store, options);
        const std::size_t multiple = GradientSync::padding_multiple(dp.size());
        const std::size_t max_bucket =
            std::max(multiple, bucket_bytes / sizeof(float) / multiple * multiple);
        CHECK(sync.bucket_count() == (net.store.buffer_size() + max_bucket - 1) / max_bucket);
        CHECK(sync.sharded() == zero1);
        CHECK(sync.update_size() ==
              (zero1 ? net.store.buffer_size() / static_cast<std::size_t>(dp.size())
                     : net.store.buffer_size()));

        reduce_step(net, sync, 0);
        // (a) buckets launched from backward: all of them, since the first layer reports too.
        CHECK(sync.buckets_started_early() == (overlap ? sync.bucket_count() : 0));
        // (b) the sum over dp of every rank's local gradients.
        const std::vector<float> got = to_host(sync.update_grads());
        CHECK(relative_error(got, zero1 ? shard_of(sync, expected) : expected) <= 1e-6);
        per_overlap[overlap] = got;

        // (c) an unarmed step starts nothing from backward and still reduces correctly.
        reduce_step(net, sync, 0, false);
        CHECK(sync.buckets_started_early() == 0);
        CHECK(to_host(sync.update_grads()) == got);
      }
      // (e) overlap changes when buckets start, never what they compute.
      CHECK(per_overlap[0] == per_overlap[1]);
    }
  }
}

TEST_CASE("GradientSync leaves non-last micro-batches alone", "[dp_sync_mpi]") {
  ProcessGrid grid(MPI_COMM_WORLD, 1, 1);
  Communicator& dp = grid.communicator(Axis::dp);
  const bool model_reports = model_reports_progress();
  // Local gradients after the first micro-batch only (no reduction).
  Net ref(dp.size());
  ref.micro_batch(0, 0);
  const std::vector<float> local_first = to_host(ref.store.grads());

  for (bool zero1 : {false, true}) {
    INFO("zero1 " << zero1);
    Net net(dp.size());
    net.simulate_progress = !model_reports;
    GradientSyncOptions options;
    options.bucket_bytes = 64;
    options.zero = zero1;
    GradientSync sync(dp, net.store, options);
    net.store.zero_grads();
    sync.begin_backward(false);
    net.micro_batch(0, 0);
    // Nothing started: the local gradients are untouched, and arming the next micro-batch
    // finds no request in flight (it throws if any is).
    CHECK(to_host(net.store.grads()) == local_first);
    CHECK_NOTHROW(sync.begin_backward(true));
    net.micro_batch(0, 1);
    // Armed: buckets are in flight now, and a new micro-batch must not begin.
    CHECK_THROWS_AS(sync.begin_backward(false), Error);
    sync.finish_reduction();
    CHECK(sync.buckets_started_early() == sync.bucket_count());
    const std::vector<float> expected = reference_grads(dp.size(), 0);
    CHECK(relative_error(to_host(sync.update_grads()),
                         zero1 ? shard_of(sync, expected) : expected) <= 1e-6);
  }
}

TEST_CASE("ZeRO-1 steps match unsharded steps and shrink the optimizer state", "[dp_sync_mpi]") {
  ProcessGrid grid(MPI_COMM_WORLD, 1, 1);
  Communicator& dp = grid.communicator(Axis::dp);
  const bool model_reports = model_reports_progress();

  OptimizerSpec spec;
  spec.type = trellis::OptimizerType::adamw;
  spec.weight_decay = 0.1f;
  spec.beta1 = 0.9f;
  spec.beta2 = 0.999f;
  spec.eps = 1e-8f;
  const float lr = 1e-2f;
  const double max_norm = 0.5;  // small enough to clip some steps: the global norm matters

  std::vector<float> params[2];
  for (bool zero1 : {false, true}) {
    INFO("zero1 " << zero1);
    Net net(dp.size());
    net.simulate_progress = !model_reports;
    GradientSyncOptions options;
    options.bucket_bytes = 512;
    options.zero = zero1;
    GradientSync sync(dp, net.store, options);
    if (zero1) {
      CHECK(sync.update_size() * static_cast<std::size_t>(dp.size()) == net.store.buffer_size());
    }
    ConstMaskView mask = sync.gather_shard(net.store.decay_mask());
    auto optimizer = make_optimizer(spec, sync.update_size(), mask);
    CHECK(optimizer->numel() == sync.update_size());
    for (int step = 0; step < 3; ++step) {
      reduce_step(net, sync, step);
      double sum_sq = grad_sum_of_squares(sync.update_grads());
      if (sync.sharded()) {
        MPI_Allreduce(MPI_IN_PLACE, &sum_sq, 1, MPI_DOUBLE, MPI_SUM, grid.dp().get());
      }
      clip_to_norm(sync.update_grads(), std::sqrt(sum_sq), max_norm);
      optimizer->step(sync.update_windows(), sync.update_grads(), lr, 1.0f);
      sync.finish_update();
    }
    params[zero1] = to_host(net.store.params());
    // Every rank holds the same whole parameters.
    std::vector<float> lo = params[zero1], hi = params[zero1];
    MPI_Allreduce(MPI_IN_PLACE, lo.data(), static_cast<int>(lo.size()), MPI_FLOAT, MPI_MIN,
                  MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, hi.data(), static_cast<int>(hi.size()), MPI_FLOAT, MPI_MAX,
                  MPI_COMM_WORLD);
    CHECK(lo == hi);
    // ZeRO-1 keeps no copy of the parameters: its windows are the parameter buffer's pieces.
    if (zero1) {
      for (const ParamWindow& w : sync.update_windows()) {
        CHECK(w.params.data() + w.begin >= net.store.params().data());
        CHECK(w.params.data() + w.end <= net.store.params().data() + net.store.buffer_size());
      }
    }
  }
  CHECK(relative_error(params[1], params[0]) <= 1e-6);
  // The parameters moved (the steps did something).
  Net initial(dp.size());
  CHECK(relative_error(to_host(initial.store.params()), params[0]) > 1e-3);
}

TEST_CASE("GradientSync restores its master shard and rejects unpadded stores", "[dp_sync_mpi]") {
  ProcessGrid grid(MPI_COMM_WORLD, 1, 1);
  Communicator& dp = grid.communicator(Axis::dp);
  CHECK(GradientSync::padding_multiple(dp.size()) ==
        static_cast<std::size_t>(dp.size()) * nn::ParameterStore::kAlignment);

  {
    // One kAlignment block: a whole multiple for dp = 1 only.
    nn::ParameterStore one_block;
    one_block.add("w", {static_cast<std::int64_t>(nn::ParameterStore::kAlignment)},
                  nn::InitSpec::constant(1.0), false);
    one_block.finalize(1);
    if (dp.size() > 1) {
      CHECK_THROWS_AS(GradientSync(dp, one_block, {}), Error);
    } else {
      CHECK_NOTHROW(GradientSync(dp, one_block, {}));
    }
    Net unfinalized(dp.size(), false);
    CHECK_THROWS_AS(GradientSync(dp, unfinalized.store, {}), Error);
  }

  Net net(dp.size());
  GradientSyncOptions options;
  options.bucket_bytes = 256;
  options.zero = true;
  {
    GradientSync sync(dp, net.store, options);
    // Restore: new parameters written into the store are what the update windows see (there is
    // no copy to refresh).
    std::vector<float> restored(net.store.buffer_size());
    for (std::size_t i = 0; i < restored.size(); ++i) restored[i] = static_cast<float>(i % 97);
    Kokkos::deep_copy(net.store.params(), test::to_device("restored", restored));
    std::vector<float> windowed;
    for (const ParamWindow& w : sync.update_windows()) {
      const std::vector<float> piece = to_host(slice(w.params, w.begin, w.end));
      windowed.insert(windowed.end(), piece.begin(), piece.end());
    }
    CHECK(windowed == shard_of(sync, restored));
    // An update of nothing gathers the same parameters back.
    sync.finish_update();
    CHECK(to_host(net.store.params()) == restored);
  }
  // The destructor detached the listener: reports go nowhere and nothing breaks.
  CHECK_NOTHROW(net.store.grads_final_from(0));
}
