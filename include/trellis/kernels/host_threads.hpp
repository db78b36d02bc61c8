// Threads of the vendor libraries on the host.
//
// Trellis runs one rank per core (per GPU on device builds) and parallelises over ranks. oneDNN,
// as Debian and most sites build it, runs on the OpenMP runtime, which by default starts one
// thread per core in every process: with one rank per core that oversubscribes the node by the
// core count. So each rank holds oneDNN to one thread unless the user asked otherwise by setting
// OMP_NUM_THREADS (e.g. one rank per socket with several cores each).
#pragma once

#include <string>

namespace trellis::kernels {

// Applies the rule above; call once per process, before the first kernel. Returns the number
// of threads oneDNN will use (1 when Trellis is built without oneDNN or on a non-OpenMP one).
int configure_host_threads();

// The threads oneDNN uses now.
int host_threads();

// "onednn sgemm (1 thread)" or "blas sgemm": for `trellis info` and the run log.
std::string host_gemm_description();

}  // namespace trellis::kernels
