// MpiCommunicator: the Communicator interface over an MPI communicator (borrowed: the process
// grid owns it). Buffers are handed to MPI as they are, so device buffers need a CUDA-aware
// MPI. Kernels that produced a buffer are fenced before MPI reads it.
#pragma once

#include "trellis/comm/communicator.hpp"
#include "trellis/comm/mpi_comm.hpp"

#include <vector>

namespace trellis {

class MpiCommunicator : public Communicator {
 public:
  // Most send()/recv() calls one group may hold.
  static constexpr std::size_t kMaxGroupOps = 64;

  explicit MpiCommunicator(const MpiComm& comm);
  ~MpiCommunicator() override;

  int rank() const override { return comm_.rank(); }
  int size() const override { return comm_.size(); }
  CommBackend backend() const override { return CommBackend::mpi; }

  void all_reduce(float* data, std::size_t count, ReduceOp op) override;
  CommRequest start_all_reduce(float* data, std::size_t count, ReduceOp op) override;
  void reduce_scatter(const float* send, float* recv, std::size_t recv_count, ReduceOp op) override;
  CommRequest start_reduce_scatter(const float* send, float* recv, std::size_t recv_count,
                                   ReduceOp op) override;
  void all_gather(const float* send, float* recv, std::size_t send_count) override;
  CommRequest start_all_gather(const float* send, float* recv, std::size_t send_count) override;
  void broadcast(float* data, std::size_t count, int root) override;
  // Host buffers only: the reduction runs in MPI's host code (Error in device-memory builds).
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
  const MpiComm& comm_;
  bool in_group_ = false;
  std::vector<MPI_Request> group_requests_;  // capacity kMaxGroupOps, reserved once
  MPI_Op bf16_sum_ = MPI_OP_NULL, fp16_sum_ = MPI_OP_NULL;  // user-defined, freed with this
  MPI_Op half_sum(Precision format) const;
};

}  // namespace trellis
