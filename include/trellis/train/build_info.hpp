// `trellis info`: build options, library versions, backends, the process grid and where each
// rank runs (host, node-local rank, device).
#pragma once

#include "trellis/comm/device_binding.hpp"
#include "trellis/core/log.hpp"
#include "trellis/train/train_config.hpp"

#include <mpi.h>

#include <string>

namespace trellis {

std::string build_summary();  // multi-line: version, compiler, options, Kokkos, MPI, HDF5, BLAS

// Collective: rank 0 prints the build summary, the grid from `config` and one line per rank.
void print_info(MPI_Comm world, const TrainConfig& config, const NodeBinding& node,
                const Logger& log);

}  // namespace trellis
