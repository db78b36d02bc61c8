// Communicator: the collectives and point-to-point transfers the parallel layers need, over one
// axis of the process grid, behind one interface with two backends:
//   MpiCommunicator   (comm/mpi_communicator.hpp)  host buffers, or device buffers with a
//                     CUDA-aware MPI
//   NcclCommunicator  (comm/nccl_communicator.hpp, TRELLIS_ENABLE_NCCL) device buffers, work
//                     enqueued on a communication stream ordered after Kokkos' execution space
// chosen at run time by parallel.backend = auto | mpi | nccl (make_communicator, in
// comm/counting_communicator.hpp: the backend wrapped in a CountingCommunicator).
//
// Buffers are float arrays in Kokkos' default memory space (the model's Views). Every call
// orders itself after kernels already launched on the default execution space, so callers
// need no fence. Counts are elements (the MPI backend throws for a count over INT_MAX).
//
// Non-blocking calls return a CommRequest that the caller owns and completes with wait(); the
// buffers must stay untouched until then. wait() on the MPI backend blocks the host; on NCCL it
// makes later device work wait (the host goes on). test() lets MPI progress a request.
//
// Grouped point-to-point (pipeline stages exchanging activations both ways): send()/recv()
// between group_start() and group_end() are launched together and complete at group_end(),
// so two ranks may each send to and receive from the other without deadlock.
#pragma once

#include "trellis/core/precision.hpp"

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace trellis {

class MpiComm;

enum class ReduceOp { sum, max, min };

enum class CommBackend { mpi, nccl };
// "auto": NCCL when the build has it (TRELLIS_ENABLE_NCCL), MPI otherwise. Throws ConfigError
// naming parallel.backend for an unknown name or for "nccl" in a build without NCCL.
CommBackend parse_comm_backend(const std::string& name);
const char* comm_backend_name(CommBackend backend);

struct CommRequest {
  MPI_Request mpi = MPI_REQUEST_NULL;  // MPI backend
  int event = -1;                      // NCCL backend: slot in the communicator's event pool
  bool pending = false;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual CommBackend backend() const = 0;

  // data [count], reduced in place over the ranks.
  virtual void all_reduce(float* data, std::size_t count, ReduceOp op) = 0;
  virtual CommRequest start_all_reduce(float* data, std::size_t count, ReduceOp op) = 0;

  // send [size() * recv_count]; rank r receives the reduction of block r into recv
  // [recv_count], which must not overlap send.
  virtual void reduce_scatter(const float* send, float* recv, std::size_t recv_count,
                              ReduceOp op) = 0;
  virtual CommRequest start_reduce_scatter(const float* send, float* recv, std::size_t recv_count,
                                           ReduceOp op) = 0;

  // send [send_count] from every rank -> recv [size() * send_count], block r from rank r.
  // In place when send == recv + rank() * send_count.
  virtual void all_gather(const float* send, float* recv, std::size_t send_count) = 0;
  virtual CommRequest start_all_gather(const float* send, float* recv, std::size_t send_count) = 0;

  virtual void broadcast(float* data, std::size_t count, int root) = 0;

  // The compressed gradient wire: 16-bit words of `format` (bf16 or fp16), summed with fp32
  // arithmetic, each partial sum rounded back to the format (MPI: a user-defined reduction on
  // host buffers; NCCL: its native bf16/fp16 sums). Same contracts as the float versions.
  virtual CommRequest start_all_reduce_half(std::uint16_t* data, std::size_t count,
                                            Precision format) = 0;
  virtual CommRequest start_reduce_scatter_half(const std::uint16_t* send, std::uint16_t* recv,
                                                std::size_t recv_count, Precision format) = 0;

  // Blocking outside a group; launched at group_end() inside one.
  virtual void send(const float* data, std::size_t count, int peer) = 0;
  virtual void recv(float* data, std::size_t count, int peer) = 0;
  virtual void group_start() = 0;
  virtual void group_end() = 0;

  // Completes a request from a start_* call (a request that is not pending is a no-op).
  virtual void wait(CommRequest& request) = 0;
  // Whether the request has completed; drives progress of MPI's non-blocking collectives.
  virtual bool test(CommRequest& request) = 0;

  // Host seconds spent so far inside blocking calls, group_end() and wait(): the time
  // communication held the caller up (the trainer reports the tp group's share per step).
  // On NCCL, whose calls return at once, this is only the host-side part.
  double blocked_seconds() const { return blocked_seconds_; }

 protected:
  Communicator() = default;
  double blocked_seconds_ = 0;
};

}  // namespace trellis
