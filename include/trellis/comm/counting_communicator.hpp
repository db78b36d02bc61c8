// CountingCommunicator: a Communicator that forwards every call to the backend it wraps and
// counts what it issued over two or more ranks (CollectiveTally), and the host seconds the
// backend blocked. The
// counting is two additions per call, cheap beside any collective, so it is always on:
// make_communicator() returns the backend wrapped in one.
#pragma once

#include "trellis/comm/collective_tally.hpp"
#include "trellis/comm/communicator.hpp"

#include <memory>

namespace trellis {

class CountingCommunicator final : public Communicator {
 public:
  explicit CountingCommunicator(std::unique_ptr<Communicator> backend);

  const CollectiveTally& tally() const { return tally_; }

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  CommBackend backend() const override { return inner_->backend(); }

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
  // A collective over one rank moves nothing and is not counted.
  void note(CollectiveKind kind, double bytes) {
    if (inner_->size() > 1) tally_.add(kind, bytes);
  }
  // After each forwarded call: the backend's blocked time is this communicator's.
  void sync_blocked() { blocked_seconds_ = inner_->blocked_seconds(); }

  std::unique_ptr<Communicator> inner_;
  CollectiveTally tally_;
};

// A communicator over the ranks of `comm` (which must outlive it), counted. Collective over
// `comm`.
std::unique_ptr<CountingCommunicator> make_communicator(CommBackend backend, const MpiComm& comm);

}  // namespace trellis
