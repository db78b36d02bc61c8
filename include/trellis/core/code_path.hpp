// Which code path the kernels take: the host bodies (host builds) or the device bodies
// (CUDA builds, and the portable build, TRELLIS_PORTABLE_KERNELS, in which the host runs what a
// GPU would so that CI executes the device code path). See docs/building.md.
#pragma once

#include "trellis/core/kokkos_types.hpp"

#include <type_traits>

#ifndef TRELLIS_PORTABLE_KERNELS
#define TRELLIS_PORTABLE_KERNELS 0
#endif

// The choice for code inside device functions (team loops), where the preprocessor makes it.
#if defined(KOKKOS_ENABLE_CUDA) || defined(KOKKOS_ENABLE_HIP) || TRELLIS_PORTABLE_KERNELS
#define TRELLIS_DEVICE_BODIES 1
#else
#define TRELLIS_DEVICE_BODIES 0
#endif

namespace trellis {

// Where the buffers live: host memory, which the CPU (MPI, HDF5, std::) may read directly.
inline constexpr bool kHostMemory = std::is_same_v<MemSpace, Kokkos::HostSpace>;
// Which body a kernel runs: the host body only on a host build that is not portable.
inline constexpr bool kHostKernels = kHostMemory && !TRELLIS_PORTABLE_KERNELS;

}  // namespace trellis
