// ShapeOnlyCommunicator: a group that only knows its rank and size. Layers read a group's rank
// and size when they are built (which slice of a tensor-parallel weight, which pipeline stage)
// and communicate only when they run, so a model built with this group is the rank's model as
// it would be allocated: the memory plan builds models so (train/config/memory_plan.hpp) and
// never runs them. Any communication throws.
#pragma once

#include "trellis/comm/communicator.hpp"

namespace trellis {

class ShapeOnlyCommunicator final : public Communicator {
 public:
  ShapeOnlyCommunicator(int rank, int size) : rank_(rank), size_(size) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  CommBackend backend() const override { return CommBackend::mpi; }

  void all_reduce(float*, std::size_t, ReduceOp) override { refuse(); }
  CommRequest start_all_reduce(float*, std::size_t, ReduceOp) override { refuse(); }
  void reduce_scatter(const float*, float*, std::size_t, ReduceOp) override { refuse(); }
  CommRequest start_reduce_scatter(const float*, float*, std::size_t, ReduceOp) override {
    refuse();
  }
  void all_gather(const float*, float*, std::size_t) override { refuse(); }
  CommRequest start_all_gather(const float*, float*, std::size_t) override { refuse(); }
  void broadcast(float*, std::size_t, int) override { refuse(); }
  CommRequest start_all_reduce_half(std::uint16_t*, std::size_t, Precision) override { refuse(); }
  CommRequest start_reduce_scatter_half(const std::uint16_t*, std::uint16_t*, std::size_t,
                                        Precision) override {
    refuse();
  }
  void send(const float*, std::size_t, int) override { refuse(); }
  void recv(float*, std::size_t, int) override { refuse(); }
  void group_start() override { refuse(); }
  void group_end() override { refuse(); }
  void wait(CommRequest&) override { refuse(); }
  bool test(CommRequest&) override { refuse(); }

 private:
  [[noreturn]] static void refuse();

  int rank_, size_;
};

}  // namespace trellis
