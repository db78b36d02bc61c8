// Errors and the one helper every C API return code goes through.
//
// Each error carries the exit code the process should end with, so main() can map any
// failure to a documented status: 2 for bad configuration or usage, 3 for bad input data or
// checkpoints, 1 for everything else.
#pragma once

#include <stdexcept>
#include <string>

namespace trellis {

// stopped_resumable (75, sysexits' EX_TEMPFAIL): the run stopped early on a signal or a time
// limit after writing a checkpoint; resubmitting with --resume auto continues it.
// peer_lost (76): the watchdog ended this rank because other ranks' heartbeats stopped (a
// lost node); the last periodic checkpoint resumes it once the job has nodes again.
enum class ExitCode : int {
  ok = 0,
  failure = 1,
  usage = 2,
  bad_input = 3,
  stopped_resumable = 75,
  peer_lost = 76
};

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, ExitCode code = ExitCode::failure)
      : std::runtime_error(message), code_(code) {}
  ExitCode code() const { return code_; }

 private:
  ExitCode code_;
};

// A bad key or value in the configuration or on the command line (exit 2).
class ConfigError : public Error {
 public:
  explicit ConfigError(const std::string& message) : Error(message, ExitCode::usage) {}
};

// A bad data file, dataset or checkpoint (exit 3).
class InputError : public Error {
 public:
  explicit InputError(const std::string& message) : Error(message, ExitCode::bad_input) {}
};

// Throws Error("<api> call `<call>` failed at file:line: <detail>") when ok is false.
// The API-specific macros (TRELLIS_MPI, TRELLIS_H5, ...) fill in detail from their library.
[[noreturn]] void throw_call_failure(const char* api, const char* call, const std::string& detail,
                                     const char* file, int line);

inline void check_call(bool ok, const char* api, const char* call, const std::string& detail,
                       const char* file, int line) {
  if (!ok) throw_call_failure(api, call, detail, file, line);
}

}  // namespace trellis

// Internal invariants and user-facing preconditions that are not C API calls.
#define TRELLIS_REQUIRE(cond, message)                                                        \
  do {                                                                                        \
    if (!(cond))                                                                              \
      throw ::trellis::Error(std::string("requirement failed: ") + #cond + ": " + (message)); \
  } while (0)
