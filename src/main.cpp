// trellis: one SPMD executable. main() starts MPI and Kokkos around the command the command
// line names; the commands, their options and their help are one table
// (train/commands/command_table.cpp), each command one file under src/train/commands/.
//
// owns: the process' start and end (umask, MPI thread level, stop-signal catcher, Kokkos,
//       host threads, the exit code)
//
// Exit codes: 0 ok, 1 failure, 2 bad configuration or usage, 3 bad input data or weights,
// 75 stopped early by a signal or time limit after writing a checkpoint (resubmit to resume),
// 76 ended by the watchdog because other ranks were lost (their heartbeats stopped).
#include "trellis/comm/agreement.hpp"
#include "trellis/comm/device_binding.hpp"
#include "trellis/comm/error_policy.hpp"
#include "trellis/core/error.hpp"
#include "trellis/core/log.hpp"
#include "trellis/core/memory_ledger.hpp"
#include "trellis/data/hdf5.hpp"
#include "trellis/kernels/host_threads.hpp"
#include "trellis/train/commands/command.hpp"
#include "trellis/train/faults/stop_requests.hpp"

#include <mpi.h>
#include <sys/stat.h>
#include <Kokkos_Core.hpp>

#include <cstdio>
#include <string>

namespace {

using namespace trellis;

void initialize_kokkos(int device) {
#if KOKKOS_VERSION >= 30700
  Kokkos::InitializationSettings settings;
  if (device >= 0) settings.set_device_id(device);
  Kokkos::initialize(settings);
#else
  Kokkos::InitArguments arguments;
  if (device >= 0) arguments.device_id = device;
  Kokkos::initialize(arguments);
#endif
}

int run(int argc, char** argv, int rank) {
  CommandLine line;
  run_agreed(MPI_COMM_WORLD, Logger(rank), [&] { line = parse_command_line(argc, argv); });
  if (line.version) {
    if (rank == 0)
      std::printf("trellis %s (`trellis info` describes the build)\n", TRELLIS_VERSION);
    return 0;
  }
  if (line.help) {
    if (rank == 0) std::printf("%s", command_help(line.command).c_str());
    return 0;
  }
  const NodeBinding node = bind_to_node(MPI_COMM_WORLD);
  initialize_kokkos(node.device);
  kernels::configure_host_threads();
  struct KokkosFinalizer {
    ~KokkosFinalizer() { Kokkos::finalize(); }
  } finalizer;
  const MemoryTracking memory_tracking;  // every buffer by category (core/memory_ledger.hpp)
  const Logger log(rank);
  return line.command->run(CommandContext{MPI_COMM_WORLD, node, log}, line.args);
}

}  // namespace

int main(int argc, char** argv) {
  // Runs, checkpoints and models hold a project's data and weights: files 0640 and
  // directories 0750 at most (group-readable for a shared project directory, not world-
  // readable on a shared cluster), whatever the job's umask allows; a stricter umask stays.
  ::umask(::umask(0) | 027);
  // FUNNELED is all Trellis needs: every MPI call comes from the main thread (Kokkos' host
  // threads never call MPI, and the watchdog thread ends the process without MPI, see
  // train/faults/watchdog.hpp). A library that gives less cannot run it correctly: say so and stop.
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
    std::fprintf(stderr, "error: MPI_Init_thread failed\n");
    return 1;
  }
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (provided < MPI_THREAD_FUNNELED) {
    std::fprintf(stderr,
                 "[rank %d] error: the MPI library provides thread support level %d, below "
                 "MPI_THREAD_FUNNELED (%d), which Trellis needs (MPI from the main thread while "
                 "other threads run); use an MPI build with thread support\n",
                 rank, provided, MPI_THREAD_FUNNELED);
    MPI_Finalize();
    return 1;
  }
  const trellis::Logger log(rank);
  int code = 0;
  try {
    // Before any thread of ours starts: they inherit the main thread's blocked stop signals
    // (train/faults/stop_requests.cpp says why no thread running oneDNN may take a signal).
    trellis::StopRequests::install();
    code = trellis::run_or_abort(MPI_COMM_WORLD, log, [&] { return run(argc, argv, rank); });
  } catch (...) {
    code = trellis::exit_code_for(std::current_exception(), log);
  }
  if (const long open = trellis::hdf5_open_files(); open > 0) {
    // Every handle is closed by now (RAII); what is left failed to close, and HDF5 would crash
    // on it inside MPI_Finalize. End the job with its exit code instead.
    log.error(std::to_string(open) +
              " HDF5 file(s) could not be closed; ending without "
              "MPI_Finalize (exit code " +
              std::to_string(code == 0 ? 1 : code) + ")");
    MPI_Abort(MPI_COMM_WORLD, code == 0 ? 1 : code);
  }
  MPI_Finalize();
  return code;
}
