// TRELLIS_NCCL(call) and TRELLIS_CUDA(call): run an NCCL or CUDA runtime call and throw
// trellis::Error naming the call and the library's error string when it does not succeed
// (ncclSuccess / cudaSuccess). CUDA builds only (TRELLIS_ENABLE_CUDA; TRELLIS_NCCL also needs
// TRELLIS_ENABLE_NCCL).
#pragma once

#include "trellis/core/error.hpp"

#if defined(TRELLIS_ENABLE_CUDA)

#include <cuda_runtime.h>

#define TRELLIS_CUDA(call)                                                                         \
  do {                                                                                             \
    const cudaError_t trellis_cuda_rc_ = (call);                                                   \
    if (trellis_cuda_rc_ != cudaSuccess)                                                           \
      ::trellis::throw_call_failure("CUDA", #call, cudaGetErrorString(trellis_cuda_rc_), __FILE__, \
                                    __LINE__);                                                     \
  } while (0)

#endif  // TRELLIS_ENABLE_CUDA

#if defined(TRELLIS_ENABLE_NCCL)

#include <nccl.h>

#define TRELLIS_NCCL(call)                                                                         \
  do {                                                                                             \
    const ncclResult_t trellis_nccl_rc_ = (call);                                                  \
    if (trellis_nccl_rc_ != ncclSuccess)                                                           \
      ::trellis::throw_call_failure("NCCL", #call, ncclGetErrorString(trellis_nccl_rc_), __FILE__, \
                                    __LINE__);                                                     \
  } while (0)

#endif  // TRELLIS_ENABLE_NCCL
