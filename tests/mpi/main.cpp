// MPI test runner: every rank runs the same Catch2 tests; a test binary fails if any rank
// failed, so ctest sees one verdict. Every rank prints its own Catch report (their lines may
// interleave; a failure names the rank's assertion), then rank 0 prints the overall verdict.
#define CATCH_CONFIG_RUNNER
#include "catch.hpp"

#include "trellis/kernels/host_threads.hpp"

#include <mpi.h>
#include <Kokkos_Core.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int local_failures = 0;
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    trellis::kernels::configure_host_threads();
    local_failures = Catch::Session().run(argc, argv);
  }
  int any_failures = 0;
  MPI_Allreduce(&local_failures, &any_failures, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) {
    std::printf("MPI tests: %s over all ranks\n", any_failures ? "FAILED" : "passed");
  }
  MPI_Finalize();
  return any_failures ? 1 : 0;
}
