// A one-line progress bar for interactive runs (rank 0): epoch, step, loss, throughput and
// ETA, redrawn in place. Batch jobs and logs get the plain periodic log lines instead (see
// want_progress_bar for how log.progress = auto decides).
#pragma once

#include <cstdint>
#include <functional>

namespace trellis {

class ProgressBar {
 public:
  explicit ProgressBar(bool enabled) : enabled_(enabled) {}
  // Redraws the line (at most ~10 times a second).
  void update(std::int64_t epoch, std::int64_t step, std::int64_t total_steps, double loss,
              double samples_per_sec, double eta_s);
  // Erases the line, so that a log message starts on a clean line.
  void clear();
  bool enabled() const { return enabled_; }

 private:
  bool enabled_;
  bool drawn_ = false;
  double last_draw_ = -1.0;
};

// What log.progress = auto decides from.
struct ConsoleFacts {
  bool stdout_is_tty = false;       // isatty(stdout)
  bool under_mpi_launcher = false;  // started by mpirun/mpiexec/srun (see below)
};
// Whether an MPI launcher started this process: OMPI_COMM_WORLD_SIZE (Open MPI), PMIX_RANK
// (Open MPI 4+, srun --mpi=pmix) or PMI_RANK (MPICH/Intel hydra) is set. get_env: std::getenv
// or a fake.
bool started_by_mpi_launcher(const std::function<const char*(const char*)>& get_env);
ConsoleFacts console_facts();  // this process's

// Whether log.progress ("auto" | "bar" | "lines") asks for a bar on this rank. Only rank 0
// draws. "auto" draws only when stdout is a terminal AND no MPI launcher started the process:
// Open MPI's mpirun hands its ranks a pseudo-terminal even when its own output goes to a file
// or a pipe (`mpirun ... > log`), so a rank's isatty says nothing about where the text ends up,
// and a bar would fill the log with escape sequences. Under a launcher ask for log.progress =
// bar explicitly (the Makefile's demos do when make's stdout is a terminal).
bool want_progress_bar(const char* mode, int rank, const ConsoleFacts& facts);
bool want_progress_bar(const char* mode, int rank);  // with console_facts()

}  // namespace trellis
