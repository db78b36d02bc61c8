// TRELLIS_MPI(call): runs an MPI call and throws trellis::Error naming the call and MPI's
// error string when it does not return MPI_SUCCESS. Communicators we create are set to
// MPI_ERRORS_RETURN so that failures reach this check instead of aborting silently.
#pragma once

#include "trellis/core/error.hpp"

#include <mpi.h>

#include <string>

namespace trellis {
std::string mpi_error_string(int code);
}

#define TRELLIS_MPI(call)                                                                       \
  do {                                                                                          \
    const int trellis_mpi_rc_ = (call);                                                         \
    if (trellis_mpi_rc_ != MPI_SUCCESS)                                                         \
      ::trellis::throw_call_failure("MPI", #call, ::trellis::mpi_error_string(trellis_mpi_rc_), \
                                    __FILE__, __LINE__);                                        \
  } while (0)
