// PowerSGD (parallel/powersgd.hpp) on the small Mlp of the GradientSync tests, at whatever
// world size the test runs: at full rank it is the exact sum; at low rank the approximation
// plus every rank's error feedback is the exact sum (nothing is lost, only delayed);
// uncompressed parameters are summed exactly; the bytes shrink as (n + m) r; through
// GradientSync, ZeRO-1 gets its pieces of the same result.
//
// Only CHECKs after the first collective, so a failing rank still joins every collective.
#include "catch.hpp"
#include "mpi/gradient_sync_helpers.hpp"

#include "trellis/comm/process_grid.hpp"
#include "trellis/parallel/powersgd.hpp"

#include <mpi.h>

#include <cmath>
#include <vector>

using namespace trellis;
using namespace trellis::gradient_sync_test;

namespace {

// Local gradients of step 0 in net's store (no reduction).
void local_step(Net& net) {
  net.store.zero_grads();
  for (int k = 0; k < kMicroBatches; ++k) net.micro_batch(0, k);
}

std::vector<float> summed(std::vector<float> v) {
  MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_FLOAT, MPI_SUM,
                MPI_COMM_WORLD);
  return v;
}

}  // namespace

TEST_CASE("PowerSGD at full rank is the exact sum", "[dp_sync_mpi]") {
  ProcessGrid grid(MPI_COMM_WORLD, 1, 1);
  Communicator& dp = grid.communicator(Axis::dp);
  const std::vector<float> expected = reference_grads(dp.size(), 0);
  Net net(dp.size());
  PowerSgdOptions options;
  options.rank = 33;  // >= every matrix's row count: P spans the whole column space
  options.min_compression = 0;
  PowerSgd power(dp, net.store, options);
  CHECK(power.compressed_count() == 3);
  local_step(net);
  power.reduce();
  CHECK(relative_error(to_host(net.store.grads()), expected) < 1e-4);
}

TEST_CASE("PowerSGD at low rank loses nothing: approximation + errors = the sum", "[dp_sync_mpi]") {
  ProcessGrid grid(MPI_COMM_WORLD, 1, 1);
  Communicator& dp = grid.communicator(Axis::dp);
  const std::vector<float> expected = reference_grads(dp.size(), 0);
  Net net(dp.size());
  PowerSgdOptions options;
  options.rank = 2;
  PowerSgd power(dp, net.store, options);
  // 33 x 20 and 17 x 33 gain from rank 2; the 5 x 17 output layer (85 < 2 x 22 x 2) does not.
  REQUIRE(power.compressed_count() == 2);
  const std::size_t r = 2, compressed = 33 * 20 + 17 * 33;
  CHECK(power.compressed_elements() == compressed);
  CHECK(power.floats_per_step() ==
        (33 + 20) * r + (17 + 33) * r + net.store.buffer_size() - compressed);
  local_step(net);
  power.reduce();
  const std::vector<float> got = to_host(net.store.grads());
  const std::vector<float> errors = summed(to_host(power.error()));
  // The compressed matrices: approximation + the ranks' errors = the exact sum; and the
  // approximation is not the sum (rank 2 < rank of the sum).
  std::size_t e = 0;
  double worst = 0, scale = 0, missing = 0;
  for (std::size_t i = 0; i < net.store.size(); ++i) {
    const nn::ParamInfo& info = net.store.info(i);
    const bool is_compressed = info.shape.size() == 2 && info.shape[0] != 5;
    for (std::size_t k = 0; k < info.numel; ++k) {
      const std::size_t at = info.offset + k;
      if (is_compressed) {
        worst = std::max(worst, std::fabs(double(got[at]) + errors[e] - expected[at]));
        missing = std::max(missing, std::fabs(double(errors[e])));
        ++e;
      } else {
        worst = std::max(worst, std::fabs(double(got[at]) - expected[at]));
      }
      scale = std::max(scale, std::fabs(double(expected[at])));
    }
  }
  CHECK(e == compressed);
  CHECK(worst <= 1e-5 * scale);
  CHECK(missing > 1e-3 * scale);
}

TEST_CASE("GradientSync runs PowerSGD from its start step, ZeRO-1 included", "[dp_sync_mpi]") {
  ProcessGrid grid(MPI_COMM_WORLD, 1, 1);
  Communicator& dp = grid.communicator(Axis::dp);
  const std::vector<float> expected = reference_grads(dp.size(), 0);
  std::vector<float> full;
  for (bool zero1 : {false, true}) {
    INFO("zero1 " << zero1);
    Net net(dp.size());
    GradientSyncOptions options;
    options.zero = zero1;
    options.powersgd.rank = 2;
    options.powersgd.start_step = 1;
    GradientSync sync(dp, net.store, options);
    sync.set_step(0);  // before the start step: the plain, exact reduction
    CHECK_FALSE(sync.powersgd_active());
    reduce_step(net, sync, 0);
    CHECK(relative_error(to_host(sync.update_grads()),
                         zero1 ? shard_of(sync, expected) : expected) <= 1e-6);
    sync.set_step(1);
    CHECK(sync.powersgd_active());
    reduce_step(net, sync, 0);
    const std::vector<float> got = to_host(sync.update_grads());
    if (!zero1) {
      full = got;
      CHECK(relative_error(got, expected) > 1e-4);  // compressed: not the exact sum
      if (dp.size() > 1) CHECK(sync.wire_bytes_per_step() < sync.fp32_bytes_per_step() / 2);
    } else {
      CHECK(got == shard_of(sync, full));
    }
  }
}
