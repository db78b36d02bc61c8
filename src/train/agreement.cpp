#include "trellis/train/agreement.hpp"

#include "trellis/comm/mpi_check.hpp"

namespace trellis {

void run_agreed(MPI_Comm world, const Logger& log, const std::function<void()>& phase) {
  int local_code = 0;
  try {
    phase();
  } catch (const Error& e) {
    log.error(e.what());
    local_code = static_cast<int>(e.code());
  } catch (const std::exception& e) {
    log.error(e.what());
    local_code = static_cast<int>(ExitCode::failure);
  }
  // Highest code wins: usage (2) and bad input (3) outrank a generic failure (1).
  int worst = 0;
  TRELLIS_MPI(MPI_Allreduce(&local_code, &worst, 1, MPI_INT, MPI_MAX, world));
  if (worst != 0)
    throw AgreedFailure("stopped on every rank after an error", static_cast<ExitCode>(worst));
}

}  // namespace trellis
