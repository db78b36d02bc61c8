// Serial test runner: initialises MPI (singleton world) and Kokkos once for all unit tests,
// because the HDF5 reader and the communicator wrappers need an MPI library even at one rank.
#define CATCH_CONFIG_RUNNER
#include "catch.hpp"

#include "trellis/kernels/host_threads.hpp"

#include <mpi.h>
#include <Kokkos_Core.hpp>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int result = 0;
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    trellis::kernels::configure_host_threads();
    result = Catch::Session().run(argc, argv);
  }
  MPI_Finalize();
  return result;
}
