// "Every rank agrees before anyone acts": the project's one mechanism for errors that may
// happen on some ranks only. A phase records at most one failure per rank (PhaseFailure);
// agree() then finds the winning failure over all ranks and broadcasts it, so every rank
// throws the same exception with the same message and exit code, and no rank is left alone
// in a later collective.
//
// Winner: the lowest `order` (where in the phase it happened: kWhole = the phase as a whole,
// i = item i, e.g. tensor i of a file); among equal orders the highest exit code (usage 2 and
// bad input 3 outrank a generic failure 1); then the lowest rank.
//
// Two uses on it:
//  - run_agreed(): a phase of main()/Trainer setup; every rank throws AgreedFailure.
//  - capture()/agree(): finer phases with ordered items (the checkpoint file reader and
//    writer); every rank throws the winner as its own class (Error, ConfigError, InputError).
#pragma once

#include "trellis/core/error.hpp"
#include "trellis/core/log.hpp"

#include <mpi.h>

#include <climits>
#include <functional>
#include <string>

namespace trellis {

// Thrown by run_agreed() on every rank once all ranks agreed that a phase failed somewhere:
// what() is the winning message (the same on every rank), code() its exit code. The ranks that
// failed have already printed their own message; main() only has to exit with code().
class AgreedFailure : public Error {
 public:
  AgreedFailure(const std::string& message, ExitCode code) : Error(message, code) {}
};

// This rank's first failure of a phase (see the winner rule above).
struct PhaseFailure {
  static constexpr int kWhole = -1;
  static constexpr int kNone = INT_MAX;
  int order = kNone;
  ExitCode code = ExitCode::failure;
  std::string message;

  bool failed() const { return order != kNone; }
  // Keeps the earlier of the recorded and the new failure.
  void record(int at, ExitCode c, const std::string& m);
};

// The failure all ranks agreed on.
struct AgreedError {
  bool failed = false;
  ExitCode code = ExitCode::ok;
  std::string message;
};

// Runs fn; an exception becomes a failure at `order`, its message prefixed. as_input: every
// trellis::Error counts as bad input (exit 3), e.g. it came from reading a checkpoint.
template <class F>
void capture(PhaseFailure& failure, int order, const std::string& prefix, bool as_input, F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    failure.record(order, as_input ? ExitCode::bad_input : e.code(), prefix + e.what());
  } catch (const std::exception& e) {
    failure.record(order, ExitCode::failure, prefix + e.what());
  }
}

// Collective over comm: the winning failure (failed == false when no rank failed). Costs one
// MPI_Allreduce, plus two MPI_Bcast when some rank failed.
AgreedError agree_on(MPI_Comm comm, const PhaseFailure& failure);

// Collective over comm: when any rank failed, every rank throws the winner as its class.
void agree(MPI_Comm comm, const PhaseFailure& failure);

// Throws Error / ConfigError / InputError by exit code.
[[noreturn]] void throw_error(ExitCode code, const std::string& message);

// Runs `phase`. If it threw on any rank, the failing ranks print their error through `log`,
// and every rank throws AgreedFailure with the winning message and code. Collective over
// `world`.
void run_agreed(MPI_Comm world, const Logger& log, const std::function<void()>& phase);

}  // namespace trellis
