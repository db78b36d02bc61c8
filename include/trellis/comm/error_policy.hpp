// The process' one error policy, used by main() around every command and by the trainer
// around its run.
//
//   - AgreedFailure: every rank agreed to stop (run_agreed); each failing rank has printed its
//     own message. Unwinding is safe (nobody waits in a collective): the exception travels up
//     to main(), which exits with its code.
//   - Any other error: this rank may have seen it alone, while other ranks wait in a
//     collective; unwinding would run collective destructors (MPI-IO file close, pending
//     requests) that never complete. With more than one rank the whole job ends right here,
//     before any unwinding past the guard: the message is printed and MPI_Abort carries the
//     error's exit code. A single rank has nobody to wait for: the error is rethrown and
//     main() exits with its code after a clean shutdown.
#pragma once

#include "trellis/comm/agreement.hpp"
#include "trellis/core/error.hpp"
#include "trellis/core/log.hpp"

#include <mpi.h>

#include <exception>
#include <string>

namespace trellis {

// Prints `message` and ends every rank of the job with `code` (MPI_Abort on MPI_COMM_WORLD).
[[noreturn]] void abort_job(const Logger& log, const std::string& message, ExitCode code);

// The exit code main() returns for an exception that reached it (after printing it unless it
// is an AgreedFailure, whose ranks printed their own messages).
int exit_code_for(const std::exception_ptr& error, const Logger& log);

// Runs fn under the policy above; returns what fn returns.
template <class F>
auto run_or_abort(MPI_Comm world, const Logger& log, F&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const AgreedFailure&) {
    throw;
  } catch (const std::exception& e) {
    int size = 1;
    MPI_Comm_size(world, &size);
    if (size == 1) throw;
    const auto* error = dynamic_cast<const Error*>(&e);
    abort_job(log, error ? e.what() : std::string("unexpected exception: ") + e.what(),
              error ? error->code() : ExitCode::failure);
  }
}

}  // namespace trellis
