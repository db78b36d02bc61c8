#include "trellis/comm/agreement.hpp"

#include "trellis/comm/mpi_check.hpp"

#include <cstdint>

namespace trellis {

void PhaseFailure::record(int at, ExitCode c, const std::string& m) {
  if (at > order || (at == order && static_cast<int>(c) <= static_cast<int>(code))) return;
  order = at;
  code = c;
  message = m;
}

AgreedError agree_on(MPI_Comm comm, const PhaseFailure& failure) {
  int rank = 0;
  TRELLIS_MPI(MPI_Comm_rank(comm, &rank));
  // Key, smallest wins: [order + 1 : 32 bits][255 - code : 8 bits][rank : 24 bits].
  std::uint64_t key = UINT64_MAX;
  if (failure.failed()) {
    const auto severity = static_cast<std::uint64_t>(255 - (static_cast<int>(failure.code) & 255));
    key = (static_cast<std::uint64_t>(static_cast<std::int64_t>(failure.order) + 1) << 32) |
          (severity << 24) | (static_cast<std::uint64_t>(rank) & 0xFFFFFFu);
  }
  std::uint64_t winner_key = UINT64_MAX;
  TRELLIS_MPI(MPI_Allreduce(&key, &winner_key, 1, MPI_UINT64_T, MPI_MIN, comm));
  AgreedError agreed;
  if (winner_key == UINT64_MAX) return agreed;
  const int winner = static_cast<int>(winner_key & 0xFFFFFFu);
  int header[2] = {static_cast<int>(failure.code), static_cast<int>(failure.message.size())};
  TRELLIS_MPI(MPI_Bcast(header, 2, MPI_INT, winner, comm));
  agreed.failed = true;
  agreed.code = static_cast<ExitCode>(header[0]);
  agreed.message = failure.message;
  agreed.message.resize(static_cast<std::size_t>(header[1]));
  TRELLIS_MPI(MPI_Bcast(agreed.message.data(), header[1], MPI_CHAR, winner, comm));
  return agreed;
}

void throw_error(ExitCode code, const std::string& message) {
  switch (code) {
    case ExitCode::bad_input:
      throw InputError(message);
    case ExitCode::usage:
      throw ConfigError(message);
    default:
      throw Error(message, code);
  }
}

void agree(MPI_Comm comm, const PhaseFailure& failure) {
  const AgreedError agreed = agree_on(comm, failure);
  if (agreed.failed) throw_error(agreed.code, agreed.message);
}

void run_agreed(MPI_Comm world, const Logger& log, const std::function<void()>& phase) {
  PhaseFailure failure;
  capture(failure, PhaseFailure::kWhole, "", false, phase);
  if (failure.failed()) log.error(failure.message);
  const AgreedError agreed = agree_on(world, failure);
  if (agreed.failed) throw AgreedFailure(agreed.message, agreed.code);
}

}  // namespace trellis
