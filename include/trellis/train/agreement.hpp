// "Every rank agrees before anyone acts": runs a phase that may throw on some ranks only
// (config parsing, opening files) and then agrees over the world, so that either every rank
// continues or every rank ends with the same exit code. No rank is left in a collective.
#pragma once

#include "trellis/core/error.hpp"
#include "trellis/core/log.hpp"

#include <mpi.h>

#include <functional>

namespace trellis {

// Thrown on every rank once all ranks agreed that a phase failed somewhere. The ranks that
// failed have already printed their own message; main() only has to exit with code().
class AgreedFailure : public Error {
 public:
  AgreedFailure(const std::string& message, ExitCode code) : Error(message, code) {}
};

// Runs `phase`. If it threw on any rank, the failing ranks print their error through `log`,
// and every rank throws AgreedFailure with the highest exit code. Collective over `world`.
void run_agreed(MPI_Comm world, const Logger& log, const std::function<void()>& phase);

}  // namespace trellis
