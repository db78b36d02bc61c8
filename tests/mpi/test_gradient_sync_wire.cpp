// GradientSync with a compressed wire (parallel.grad_dtype = bf16 | fp16): every bucket size,
// overlap on and off, with and without ZeRO-1, the reduced gradients equal the fp32 reduction
// within the format's rounding (and exactly the emulated 16-bit sum at up to 2 ranks), are
// the same on every rank, and half the bytes go over the wire.
//
// Only CHECKs after the first collective, so a failing rank still joins every collective.
#include "catch.hpp"
#include "mpi/gradient_sync_helpers.hpp"

#include "trellis/comm/process_grid.hpp"
#include "trellis/core/error.hpp"
#include "trellis/core/host_simd.hpp"
#include "trellis/core/precision.hpp"

#include <mpi.h>

#include <cmath>
#include <vector>

using namespace trellis;
using namespace trellis::gradient_sync_test;

namespace {

// This rank's local gradients of `step` (no reduction).
std::vector<float> local_grads(int dp_size, int step) {
  Net ref(dp_size);
  ref.store.zero_grads();
  for (int k = 0; k < kMicroBatches; ++k) ref.micro_batch(step, k);
  return to_host(ref.store.grads());
}

}  // namespace

TEST_CASE("A 16-bit gradient wire reduces like fp32 within the format's rounding",
          "[dp_sync_mpi]") {
  if (!kHostMemory) return;  // the MPI 16-bit sum runs on host buffers (NCCL has its own)
  ProcessGrid grid(MPI_COMM_WORLD, 1, 1);
  Communicator& dp = grid.communicator(Axis::dp);
  const int p = dp.size();
  const std::vector<float> local = local_grads(p, 0);
  const std::vector<float> exact = reference_grads(p, 0);
  std::vector<float> magnitude(local.size());  // sum over ranks of |local gradient|
  for (std::size_t i = 0; i < local.size(); ++i) magnitude[i] = std::fabs(local[i]);
  MPI_Allreduce(MPI_IN_PLACE, magnitude.data(), static_cast<int>(magnitude.size()), MPI_FLOAT,
                MPI_SUM, MPI_COMM_WORLD);
  // At up to two ranks the 16-bit sum is one rounding of one fp32 addition: exactly emulated.
  std::vector<float> emulated(local.size());

  for (Precision format : {Precision::bf16, Precision::fp16}) {
    // Unit roundoff; each rank's cast plus at most p - 1 rounded partial sums.
    const double u = format == Precision::bf16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
    // fp16's subnormal spacing 2^-24: below 2^-14 the error of a rounding is absolute, 2^-25.
    const double absolute = format == Precision::fp16 ? p * std::ldexp(1.0, -25) : 0.0;
    std::vector<float> peer(local.size());
    for (std::size_t i = 0; i < local.size(); ++i) peer[i] = round_to(format, local[i]);
    if (p == 2)  // the other rank's rounded gradients
      MPI_Sendrecv_replace(peer.data(), static_cast<int>(peer.size()), MPI_FLOAT, 1 - grid.rank(),
                           5, 1 - grid.rank(), 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (std::size_t i = 0; i < local.size(); ++i)
      emulated[i] = p == 1   ? round_to(format, local[i])
                    : p == 2 ? round_to(format, round_to(format, local[i]) + peer[i])
                             : 0.0f;
    for (std::size_t bucket_bytes : {std::size_t{1}, std::size_t{1000}, std::size_t{25} << 20}) {
      for (bool zero1 : {false, true}) {
        for (bool overlap : {false, true}) {
          INFO(precision_name(format) << " bucket_bytes " << bucket_bytes << " zero1 " << zero1
                                      << " overlap " << overlap);
          Net net(p);
          net.simulate_progress = !model_reports_progress();
          GradientSyncOptions options;
          options.bucket_bytes = bucket_bytes;
          options.overlap = overlap;
          options.zero = zero1;
          options.wire = format;
          GradientSync sync(dp, net.store, options);
          reduce_step(net, sync, 0);
          const std::vector<float> got = to_host(sync.update_grads());
          const std::vector<float> want = zero1 ? shard_of(sync, exact) : exact;
          const std::vector<float> bound = zero1 ? shard_of(sync, magnitude) : magnitude;
          std::size_t outside = 0;
          for (std::size_t i = 0; i < got.size(); ++i)
            if (std::fabs(static_cast<double>(got[i]) - want[i]) >
                (p + 1) * u * bound[i] + absolute + 1e-30)
              ++outside;
          CHECK(outside == 0);
          if (p <= 2) CHECK(got == (zero1 ? shard_of(sync, emulated) : emulated));
          // Every rank holds the same sum (not sharded): compare the extremes over ranks.
          if (!zero1) {
            std::vector<float> lo = got, hi = got;
            MPI_Allreduce(MPI_IN_PLACE, lo.data(), static_cast<int>(lo.size()), MPI_FLOAT, MPI_MIN,
                          MPI_COMM_WORLD);
            MPI_Allreduce(MPI_IN_PLACE, hi.data(), static_cast<int>(hi.size()), MPI_FLOAT, MPI_MAX,
                          MPI_COMM_WORLD);
            CHECK(lo == hi);
          }
          const double ring = (zero1 ? 1.0 : 2.0) * (p - 1) / p;
          CHECK(sync.fp32_bytes_per_step() ==
                ring * static_cast<double>(net.store.buffer_size()) * 4.0);
          CHECK(sync.wire_bytes_per_step() == sync.fp32_bytes_per_step() / 2);
        }
      }
    }
  }
}
