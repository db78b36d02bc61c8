// `trellis plan --calibrate`: measures this machine, every rank at once (so ranks that share
// cores or memory bandwidth measure what each gets), and describes it as a machine type
// (machine_type.hpp) that a cluster file can hold:
//  - GEMM: the layers' fp32 GEMM, and the 16-bit one precision.kernels = auto would take, as a
//    Linear runs them (forward, weight and input gradients) on [2048 x D] rows and a [D x D]
//    weight for D = 32 ... 1024 (the smallest dimension is what the planner's efficiency curve
//    is indexed by); the peak is the best rate, the curve each rate over it;
//  - attention: the flash kernels' forward + backward at T = 256, head dims 32, 64 and 128;
//  - element-wise: a block's norm, activation and residual kernels, their bytes counted as
//    the model's work counts them (model_work.hpp);
//  - MPI: ping-pong latency (8 bytes) and bandwidth (8 MiB) between ranks 0 and 1 and, where
//    the job spans nodes, between rank 0 and the first rank of another node.
// Rates are the slowest rank's (the one that sets a step's pace). Prices, node counts and spot
// are not measured: they come from `base` (a machine type the caller has, or defaults).
#pragma once

#include "trellis/train/plan/machine_type.hpp"

#include <mpi.h>

#include <functional>
#include <string>

namespace trellis {

struct CalibrationOptions {
  std::string name = "this-machine";
  double seconds_per_measurement = 0.25;
  // Called on rank 0 after each measurement with the fraction done and what was measured.
  std::function<void(double fraction, const std::string& what)> progress;
};

// Collective over world. Devices per node: the ranks on this node (node_local_size).
MachineType calibrate_machine(MPI_Comm world, int node_local_size, int node_count,
                              const MachineType& base, const CalibrationOptions& options);

}  // namespace trellis
