// How this binary was built: version, compiler, build options, library versions and backends
// (`trellis info` prints it; checkpoints record it).
#pragma once

#include <string>

namespace trellis {

std::string build_summary();  // multi-line: version, compiler, options, Kokkos, MPI, HDF5, BLAS

}  // namespace trellis
