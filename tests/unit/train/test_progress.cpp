// log.progress = auto: a bar only for rank 0 on a terminal that no MPI launcher stands
// between (Open MPI's ranks see a pseudo-terminal even when mpirun writes to a file).
#include "catch.hpp"

#include "trellis/train/monitoring/progress.hpp"

#include <map>
#include <string>

using namespace trellis;

namespace {
// A fake environment: name -> value; unset names give nullptr.
std::function<const char*(const char*)> fake_env(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}
}  // namespace

TEST_CASE("an MPI launcher is recognised from its environment", "[progress]") {
  CHECK_FALSE(started_by_mpi_launcher(fake_env({})));
  CHECK_FALSE(started_by_mpi_launcher(fake_env({{"HOME", "/root"}, {"PMIX_RANK", ""}})));
  CHECK(started_by_mpi_launcher(fake_env({{"OMPI_COMM_WORLD_SIZE", "2"}})));  // Open MPI
  CHECK(started_by_mpi_launcher(fake_env({{"PMIX_RANK", "0"}})));             // srun --mpi=pmix
  CHECK(started_by_mpi_launcher(fake_env({{"PMI_RANK", "0"}})));              // MPICH hydra
}

TEST_CASE("log.progress = auto draws a bar only on a terminal without a launcher", "[progress]") {
  const ConsoleFacts terminal{true, false};
  const ConsoleFacts mpirun_pty{true, true};  // `mpirun ... > log`: the rank sees a pty
  const ConsoleFacts file{false, false};
  CHECK(want_progress_bar("auto", 0, terminal));
  CHECK_FALSE(want_progress_bar("auto", 0, mpirun_pty));
  CHECK_FALSE(want_progress_bar("auto", 0, file));
  CHECK_FALSE(want_progress_bar("auto", 1, terminal));  // only rank 0 draws
  // Explicit choices win over the facts.
  CHECK(want_progress_bar("bar", 0, mpirun_pty));
  CHECK(want_progress_bar("bar", 0, file));
  CHECK_FALSE(want_progress_bar("bar", 1, terminal));
  CHECK_FALSE(want_progress_bar("lines", 0, terminal));
}
