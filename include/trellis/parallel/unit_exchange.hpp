// UnitExchange: the per-unit half of ZeRO-2 and ZeRO-3 (GradientSync does the rest).
//
// Told by the blocks as they run (nn::UnitListener, through the parameter store):
//
//   ZeRO-3, parameters. Each unit's parameters exist whole only while it computes: before its
//   forward and before its backward, this rank's piece of it (in the shard [update_size]) and
//   every peer's are all-gathered into the unit's slot (zero_layout.hpp) and its compute copy
//   refreshed. The next unit's gather is started when the current one begins (forward: k + 1,
//   backward: k - 1), into the other slot, so that it travels while k computes; a slot that
//   still holds the unit asked for is not gathered again (the last unit of forward is the
//   first of backward). A recomputed forward gathers on demand and prefetches nothing.
//   With a 16-bit gather format (parallel.zero_gather_dtype, FSDP's param_dtype) each rank
//   casts its piece down and the 16-bit pieces travel (half the bytes); the slot receives
//   them widened, so the unit computes with parameters rounded to 16 bits while the shard,
//   which the optimizer updates, keeps fp32. (The 16-bit words travel as pairs in an fp32
//   all-gather: an all-gather moves bits and does no arithmetic. Pieces are multiples of 16.)
//
//   ZeRO-2 and 3, gradients. Before a unit's backward its gradient slot is zeroed (after the
//   reduction of the unit that used it last has completed); after the backward the slot is
//   reduce-scattered (sum over dp) into a receive buffer [piece], which is added into this
//   rank's shard of the gradients when it completes. Every micro-batch reduces; the shard
//   accumulates. With hybrid sharding (a replica group, zero_groups.hpp) the received piece is
//   then all-reduced over the replicas before it is added. Those all-reduces start in the
//   order the reduce-scatters did (a queue), never in the order this rank happens to see them
//   complete: non-blocking collectives match by order on every rank.
//
// Every collective is started in the same order on every dp rank (the blocks run in the same
// order everywhere), at most one gather and one reduction per slot in flight. Buffers: the
// receive buffers, 2 x [largest piece]; nothing is allocated per step.
#pragma once

#include "trellis/comm/communicator.hpp"
#include "trellis/core/kokkos_types.hpp"
#include "trellis/core/precision.hpp"
#include "trellis/kernels/precision_cast.hpp"
#include "trellis/nn/parameter_store.hpp"
#include "trellis/parallel/zero_layout.hpp"

#include <cstddef>
#include <vector>

namespace trellis {

class UnitExchange : public nn::UnitListener {
 public:
  // Where layout unit k's piece sits in the shard (update space) and how long it is.
  struct UnitShard {
    std::size_t shard_offset = 0, piece = 0;
  };
  // stage 2 or 3. shard_params: ZeRO-3's [update_size] parameters (empty for ZeRO-2);
  // shard_grads: [update_size]. All must outlive the exchange. Registers as the store's unit
  // listener; the destructor detaches it.
  // dp: the group the shards split over; replica: the group they are replicated over, or null.
  // wire: the format the reduce-scatters carry (parallel.grad_dtype; 16-bit: cast down from
  // the slot, summed with fp32 arithmetic, cast back into the receive buffer). gather: the
  // format ZeRO-3's parameter gathers carry.
  UnitExchange(Communicator& dp, Communicator* replica, nn::ParameterStore& store,
               ZeroLayout layout, int stage, std::vector<UnitShard> shards, FloatView shard_params,
               FloatView shard_grads, Precision wire = Precision::fp32,
               Precision gather = Precision::fp32);
  ~UnitExchange() override;
  UnitExchange(const UnitExchange&) = delete;
  UnitExchange& operator=(const UnitExchange&) = delete;

  void before_forward(std::size_t unit) override;
  void before_backward(std::size_t unit) override;
  void after_backward(std::size_t unit) override;
  void recomputing(bool on) override { recomputing_ = on; }

  // Completes every unit reduction (the shard then holds this step's unit gradients).
  void finish_reduction();
  // The shard's parameters changed (an update, a checkpoint): every slot is stale, and the
  // first unit's gather starts (ZeRO-3) for the next forward.
  void invalidate();
  // Gathers started, of them prefetched and already in their slot when needed (last step).
  std::size_t gathers() const { return gathers_; }
  std::size_t gathers_in_time() const { return in_time_; }
  void reset_counts() { gathers_ = in_time_ = 0; }

 private:
  struct Slot {
    long param_unit = -1;  // layout unit whose parameters the slot holds (or is receiving)
    bool gathering = false;
    CommRequest gather;
    double gather_us = -1;
    long grad_unit = -1;  // layout unit whose gradients the slot is reducing
    bool reducing = false;
    bool across = false;  // the reduce-scatter is done; `reduce` is the replicas' all-reduce
    CommRequest reduce;
    double reduce_us = -1;
    FloatView received;               // [largest piece]
    kernels::HalfView send16;         // 16-bit wire: [slot floats] the slot's gradients
    kernels::HalfView recv16;         // 16-bit wire: [largest piece] the reduced piece
    kernels::HalfView gather_send16;  // 16-bit gathers: [largest piece] this rank's piece
    kernels::HalfView gather_recv16;  // 16-bit gathers: [slot floats] every rank's
  };

  long layout_unit(std::size_t unit) const;
  Slot& slot_of(std::size_t k) { return slots_[k % slots_.size()]; }
  void ensure_params(std::size_t k);
  void prefetch(std::size_t k);
  void start_gather(std::size_t k);
  void complete_gather(Slot& slot);
  void complete_reduction(Slot& slot);
  void start_across(Slot& slot);  // the replicas' all-reduce of the received piece
  void widen(Slot& slot);         // 16-bit wire: the reduced piece into `received`
  void progress();

  Communicator& dp_;
  Communicator* replica_;
  std::vector<std::size_t> across_queue_;  // slots whose replica all-reduce is not started yet
  nn::ParameterStore& store_;
  ZeroLayout layout_;
  int stage_;
  Precision wire_, gather_;
  std::vector<UnitShard> shards_;
  FloatView shard_params_, shard_grads_;
  std::vector<Slot> slots_;
  bool recomputing_ = false;
  std::size_t gathers_ = 0, in_time_ = 0;
};

}  // namespace trellis
