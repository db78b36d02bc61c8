#include "trellis/comm/error_policy.hpp"

#include <cstdio>
#include <cstdlib>

namespace trellis {

void abort_job(const Logger& log, const std::string& message, ExitCode code) {
  log.error(message);
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, static_cast<int>(code));
  std::abort();  // not reached
}

int exit_code_for(const std::exception_ptr& error, const Logger& log) {
  try {
    std::rethrow_exception(error);
  } catch (const AgreedFailure& e) {
    return static_cast<int>(e.code());
  } catch (const Error& e) {
    log.error(e.what());
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    log.error(std::string("unexpected exception: ") + e.what());
  } catch (...) {
    log.error("unexpected exception of unknown type");
  }
  return static_cast<int>(ExitCode::failure);
}

}  // namespace trellis
