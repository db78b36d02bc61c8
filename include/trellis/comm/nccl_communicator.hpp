// NcclCommunicator (TRELLIS_ENABLE_NCCL): the Communicator interface over NCCL, one instance per
// axis of the process grid. Bootstrapped from the axis' MPI communicator: its rank 0 creates
// the NCCL unique id, MPI_Bcast hands it to the others, every rank calls ncclCommInitRank
// (collective over `comm`; `comm` is only used while constructing).
//
// Buffers must be device memory (Kokkos' default memory space on a CUDA build): NCCL kernels
// read and write them directly. Host pointers are not supported.
//
// Stream ordering contract. All NCCL work runs on one communication stream owned by this
// object (created cudaStreamNonBlocking, so it never synchronises implicitly with the legacy
// default stream). Let K be the Kokkos execution space's stream
// (Kokkos::DefaultExecutionSpace().cuda_stream()) and C the communication stream:
//   - before each operation a "ready" event is recorded on K and C waits on it, so the
//     operation sees every kernel already launched on K (callers need no fence);
//   - blocking calls (all_reduce, reduce_scatter, all_gather, broadcast, send/recv outside a
//     group, group_end) record a "done" event on C and make K wait on it, then return without
//     blocking the host: every kernel launched on K afterwards sees the result, and anything that
//     fences K (Kokkos::fence, deep_copy to host) waits for the communication too;
//   - start_* records a done event in one of kEventSlots pool events; the CommRequest holds
//     the slot. wait() makes K wait on it (the host goes on); test() queries it with
//     cudaEventQuery. Every pending request must be completed with wait() or a test() that
//     returned true: its slot stays reserved until then, and more than kEventSlots
//     outstanding requests throw.
// Collectives are not allowed inside group_start()/group_end() (they would be deferred to
// group_end and break the contract above). Counts are size_t (NCCL takes size_t counts, so there
// is no INT_MAX limit here).
#pragma once

#if defined(TRELLIS_ENABLE_NCCL)

#include "trellis/comm/communicator.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <array>

namespace trellis {

class NcclCommunicator : public Communicator {
 public:
  // Pool of events for start_* requests, used round-robin.
  static constexpr int kEventSlots = 64;

  explicit NcclCommunicator(const MpiComm& comm);
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  CommBackend backend() const override { return CommBackend::nccl; }

  void all_reduce(float* data, std::size_t count, ReduceOp op) override;
  CommRequest start_all_reduce(float* data, std::size_t count, ReduceOp op) override;
  void reduce_scatter(const float* send, float* recv, std::size_t recv_count, ReduceOp op) override;
  CommRequest start_reduce_scatter(const float* send, float* recv, std::size_t recv_count,
                                   ReduceOp op) override;
  void all_gather(const float* send, float* recv, std::size_t send_count) override;
  CommRequest start_all_gather(const float* send, float* recv, std::size_t send_count) override;
  void broadcast(float* data, std::size_t count, int root) override;
  CommRequest start_all_reduce_half(std::uint16_t* data, std::size_t count,
                                    Precision format) override;
  CommRequest start_reduce_scatter_half(const std::uint16_t* send, std::uint16_t* recv,
                                        std::size_t recv_count, Precision format) override;
  void send(const float* data, std::size_t count, int peer) override;
  void recv(float* data, std::size_t count, int peer) override;
  void group_start() override;
  void group_end() override;
  void wait(CommRequest& request) override;
  bool test(CommRequest& request) override;

 private:
  // One owner per CUDA / NCCL object: created in the constructor, destroyed (unchecked:
  // destructors must not throw) in the destructor.
  struct Stream {
    cudaStream_t get = nullptr;
    Stream();
    ~Stream();
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;
  };
  struct Event {
    cudaEvent_t get = nullptr;
    Event();
    ~Event();
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;
  };
  struct Comm {
    ncclComm_t get = nullptr;
    explicit Comm(const MpiComm& comm);
    ~Comm();
    Comm(const Comm&) = delete;
    Comm& operator=(const Comm&) = delete;
  };

  // Enqueue a collective on the communication stream, ordered after compute; false when there
  // is nothing to do (empty buffer, or a single rank where the result is the input).
  bool launch_all_reduce(float* data, std::size_t count, ReduceOp op);
  bool launch_reduce_scatter(const float* send, float* recv, std::size_t recv_count, ReduceOp op);
  bool launch_all_gather(const float* send, float* recv, std::size_t send_count);
  // Makes the communication stream wait for the work already launched on the Kokkos stream;
  // returns the communication stream.
  cudaStream_t after_compute();
  // Makes the Kokkos stream wait for the work launched so far on the communication stream.
  void compute_after();
  // Records the end of the work launched so far on the communication stream in a free slot.
  CommRequest record_request();
  void release(CommRequest& request);
  void require_no_group(const char* call) const;

  int rank_ = 0;
  int size_ = 1;
  bool in_group_ = false;
  int next_slot_ = 0;
  // Destroyed in reverse order: the NCCL communicator first, the stream last.
  Stream stream_;
  Event ready_;
  Event done_;
  std::array<Event, kEventSlots> events_;
  std::array<bool, kEventSlots> busy_{};
  Comm nccl_;
};

}  // namespace trellis

#endif  // TRELLIS_ENABLE_NCCL
