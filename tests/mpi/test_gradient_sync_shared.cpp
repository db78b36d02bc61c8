// GradientSync through node shared memory (parallel.grad_exchange = shared_memory): the same
// sums and the same parameters as through the communicator, plain and ZeRO-1, at whatever
// world size the test runs (every rank on this machine), and windows that do not hold the
// store's buffers are refused.
//
// Only CHECKs (never REQUIRE) after the first collective, so a failing rank still takes part
// in every later collective instead of leaving the others waiting.
#include "catch.hpp"
#include "mpi/gradient_sync_helpers.hpp"

#include "trellis/comm/node_shared_window.hpp"
#include "trellis/comm/process_grid.hpp"
#include "trellis/core/error.hpp"
#include "trellis/core/host_simd.hpp"
#include "trellis/optim/optimizer.hpp"
#include "trellis/parallel/gradient_sync.hpp"

#include <mpi.h>

#include <vector>

using namespace trellis;
using namespace trellis::gradient_sync_test;

TEST_CASE("GradientSync through node shared memory matches the communicator", "[dp_sync_mpi]") {
  ProcessGrid grid(MPI_COMM_WORLD, 1, 1);
  Communicator& dp = grid.communicator(Axis::dp);
  if (!kHostMemory) return;  // device buffers never live in a shared window
  const bool model_reports = model_reports_progress();
  // ctest starts every rank on this machine.
  REQUIRE(NodeSharedWindow::on_one_node(grid.dp()));
  const std::vector<float> expected = reference_grads(dp.size(), 0);

  OptimizerSpec spec;
  spec.type = trellis::OptimizerType::sgd;
  spec.momentum = 0.9f;
  spec.weight_decay = 0.01f;
  for (std::size_t bucket_bytes : {std::size_t{1}, std::size_t{1000}, std::size_t{25} << 20}) {
    for (bool zero1 : {false, true}) {
      INFO("bucket_bytes " << bucket_bytes << ", zero1 " << zero1);
      std::vector<float> params[2], first_grads[2];
      for (bool shared : {false, true}) {
        INFO("shared " << shared);
        Net net(dp.size(), false);
        net.simulate_progress = !model_reports;
        const std::size_t floats = GradientSync::shared_floats(net.store.buffer_size(), zero1);
        NodeSharedWindow window(grid.dp(), floats);
        CHECK(window.size() == dp.size());
        float* part = window.part(dp.rank());
        net.store.finalize(2024, shared ? part : nullptr,
                           shared && zero1 ? part + net.store.buffer_size() : nullptr);
        CHECK((net.store.grads().data() == window.part(dp.rank())) == shared);
        GradientSyncOptions options;
        options.bucket_bytes = bucket_bytes;
        options.zero = zero1;
        options.shared = shared ? &window : nullptr;
        GradientSync sync(dp, net.store, options);
        auto optimizer =
            make_optimizer(spec, sync.update_size(), sync.gather_shard(net.store.decay_mask()));
        for (int step = 0; step < 3; ++step) {
          reduce_step(net, sync, step);
          if (step == 0) {
            first_grads[shared] = to_host(sync.update_grads());
            CHECK(relative_error(first_grads[shared],
                                 zero1 ? shard_of(sync, expected) : expected) <= 1e-6);
            // Nothing is started from backward: the exchange waits for every rank's buffer.
            if (shared) CHECK(sync.buckets_started_early() == 0);
          }
          optimizer->step(sync.update_windows(), sync.update_grads(), 0.05f, 1.0f);
          sync.finish_update();
        }
        params[shared] = to_host(net.store.params());
        // Shared ZeRO-1: the shard is this rank's slice of the parameters themselves.
        if (shared && zero1) {
          REQUIRE(sync.update_windows().size() == 1);
          const ParamWindow& w = sync.update_windows().front();
          CHECK(w.params.data() + w.begin ==
                net.store.params().data() + dp.rank() * sync.update_size());
          CHECK(sync.update_grads().data() ==
                net.store.grads().data() + dp.rank() * sync.update_size());
          CHECK(sync.bucket_count() == 1);
        }
        // Every rank holds the same whole parameters.
        std::vector<float> lo = params[shared], hi = params[shared];
        MPI_Allreduce(MPI_IN_PLACE, lo.data(), static_cast<int>(lo.size()), MPI_FLOAT, MPI_MIN,
                      MPI_COMM_WORLD);
        MPI_Allreduce(MPI_IN_PLACE, hi.data(), static_cast<int>(hi.size()), MPI_FLOAT, MPI_MAX,
                      MPI_COMM_WORLD);
        CHECK(lo == hi);
      }
      // Sums in rank order vs MPI's order: equal up to rounding (exactly equal at 2 ranks).
      // (With zero1 the shards differ in layout: one bucket in shared memory. Each was checked
      // against its own slice of the reference above.)
      if (!zero1) CHECK(relative_error(first_grads[1], first_grads[0]) <= 1e-6);
      CHECK(relative_error(params[1], params[0]) <= 1e-6);
      if (dp.size() <= 2) CHECK(params[1] == params[0]);
    }
  }
}

TEST_CASE("GradientSync rejects a shared window that does not hold its gradients",
          "[dp_sync_mpi]") {
  ProcessGrid grid(MPI_COMM_WORLD, 1, 1);
  Communicator& dp = grid.communicator(Axis::dp);
  if (!kHostMemory) return;
  Net net(dp.size());  // gradients in a buffer of its own
  NodeSharedWindow window(grid.dp(), net.store.buffer_size());
  GradientSyncOptions options;
  options.shared = &window;
  CHECK_THROWS_AS(GradientSync(dp, net.store, options), Error);
  // Room for the gradients but not for ZeRO-1's master shard after them.
  Net small(dp.size(), false);
  NodeSharedWindow short_window(grid.dp(), small.store.buffer_size());
  small.store.finalize(1, short_window.part(dp.rank()));
  options.shared = &short_window;
  CHECK_NOTHROW(GradientSync(dp, small.store, options));
  options.zero = true;
  CHECK_THROWS_AS(GradientSync(dp, small.store, options), Error);
  // Room for both, but the parameters live elsewhere: ZeRO-1's peers could not gather them.
  Net apart(dp.size(), false);
  NodeSharedWindow wide_window(grid.dp(), 2 * apart.store.buffer_size());
  apart.store.finalize(1, wide_window.part(dp.rank()));
  options.shared = &wide_window;
  CHECK_THROWS_AS(GradientSync(dp, apart.store, options), Error);
}
