#include "trellis/parallel/unit_exchange.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/trace.hpp"
#include "trellis/kernels/vector_ops.hpp"

#include <algorithm>
#include <exception>
#include <string>

namespace trellis {

UnitExchange::UnitExchange(Communicator& dp, Communicator* replica, nn::ParameterStore& store,
                           ZeroLayout layout, int stage, std::vector<UnitShard> shards,
                           FloatView shard_params, FloatView shard_grads, Precision wire,
                           Precision gather)
    : dp_(dp),
      replica_(replica),
      store_(store),
      layout_(std::move(layout)),
      stage_(stage),
      wire_(wire),
      gather_(stage == 3 ? gather : Precision::fp32),
      shards_(std::move(shards)),
      shard_params_(shard_params),
      shard_grads_(shard_grads) {
  TRELLIS_REQUIRE(stage_ == 2 || stage_ == 3, "UnitExchange: ZeRO stage " + std::to_string(stage));
  TRELLIS_REQUIRE(shards_.size() == layout_.units.size(), "UnitExchange: one shard per unit");
  std::size_t largest = 0;
  for (const UnitShard& shard : shards_) largest = std::max(largest, shard.piece);
  slots_.resize(layout_.slots);
  for (std::size_t s = 0; s < slots_.size(); ++s) {
    slots_[s].received = FloatView("trellis::zero::received." + std::to_string(s),
                                   std::max<std::size_t>(largest, 1));
    if (wire_ != Precision::fp32) {
      slots_[s].send16 =
          kernels::HalfView("trellis::grad_wire::slot." + std::to_string(s), layout_.slot_floats);
      slots_[s].recv16 = kernels::HalfView("trellis::grad_wire::received." + std::to_string(s),
                                           std::max<std::size_t>(largest, 1));
    }
    if (gather_ != Precision::fp32) {
      slots_[s].gather_send16 = kernels::HalfView("trellis::param_wire::piece." + std::to_string(s),
                                                  std::max<std::size_t>(largest, 2));
      slots_[s].gather_recv16 =
          kernels::HalfView("trellis::param_wire::slot." + std::to_string(s), layout_.slot_floats);
    }
  }
  across_queue_.reserve(2 * slots_.size());
  store_.set_unit_listener(this);
}

UnitExchange::~UnitExchange() {
  store_.set_unit_listener(nullptr);
  // The first unit's gather of a step that never came; not while unwinding an error (the peers
  // may never have started theirs).
  if (std::uncaught_exceptions() == 0)
    for (Slot& slot : slots_)
      if (slot.gathering) dp_.wait(slot.gather);
}

long UnitExchange::layout_unit(std::size_t unit) const {
  TRELLIS_REQUIRE(unit < layout_.layout_unit.size(),
                  "UnitExchange: unit " + std::to_string(unit) + " unknown");
  return layout_.layout_unit[unit];
}

void UnitExchange::before_forward(std::size_t unit) {
  const long k = layout_unit(unit);
  if (k < 0 || stage_ < 3) return;
  ensure_params(static_cast<std::size_t>(k));
  if (!recomputing_) prefetch(static_cast<std::size_t>(k) + 1);
  progress();
}

void UnitExchange::before_backward(std::size_t unit) {
  const long k = layout_unit(unit);
  if (k < 0) return;
  const auto u = static_cast<std::size_t>(k);
  if (stage_ == 3) {
    ensure_params(u);
    if (u > 0) prefetch(u - 1);
  }
  // The slot's gradients are this unit's from here on: the last user's reduction is done.
  Slot& slot = slot_of(u);
  if (slot.reducing) complete_reduction(slot);
  const nn::UnitRange& range = layout_.units[u];
  const std::size_t at = layout_.slot_begin(u);
  kernels::fill(kernels::Vector(store_.grads().data() + at, range.end - range.begin), 0.0f);
  progress();
}

void UnitExchange::after_backward(std::size_t unit) {
  const long k = layout_unit(unit);
  if (k < 0) return;
  const auto u = static_cast<std::size_t>(k);
  Slot& slot = slot_of(u);
  TRELLIS_REQUIRE(!slot.reducing, "UnitExchange: a unit's gradient slot reduced twice");
  slot.grad_unit = k;
  slot.reducing = true;
  slot.across = false;
  slot.reduce_us = trace::recording() ? trace::now_us() : -1.0;
  const float* grads = store_.grads().data() + layout_.slot_begin(u);
  if (wire_ == Precision::fp32) {
    slot.reduce =
        dp_.start_reduce_scatter(grads, slot.received.data(), shards_[u].piece, ReduceOp::sum);
  } else {
    const std::size_t len = layout_.units[u].end - layout_.units[u].begin;
    kernels::to_half(wire_, kernels::ConstVector(grads, len),
                     kernels::HalfVector(slot.send16.data(), len));
    slot.reduce = dp_.start_reduce_scatter_half(slot.send16.data(), slot.recv16.data(),
                                                shards_[u].piece, wire_);
  }
  if (replica_ != nullptr) across_queue_.push_back(u % slots_.size());
  progress();
}

void UnitExchange::ensure_params(std::size_t k) {
  Slot& slot = slot_of(k);
  if (slot.param_unit == static_cast<long>(k)) {
    if (slot.gathering) {
      ++in_time_;
      complete_gather(slot);  // prefetched: usually already here
    }
    return;
  }
  if (slot.gathering) complete_gather(slot);  // another unit's, not needed now
  start_gather(k);
  complete_gather(slot);
}

void UnitExchange::prefetch(std::size_t k) {
  if (k >= layout_.units.size() || slots_.size() < 2) return;
  Slot& slot = slot_of(k);
  if (slot.param_unit == static_cast<long>(k) || slot.gathering) return;
  start_gather(k);
}

void UnitExchange::start_gather(std::size_t k) {
  Slot& slot = slot_of(k);
  slot.param_unit = static_cast<long>(k);
  slot.gathering = true;
  slot.gather_us = trace::recording() ? trace::now_us() : -1.0;
  ++gathers_;
  const std::size_t piece = shards_[k].piece;
  const float* mine = shard_params_.data() + shards_[k].shard_offset;
  if (gather_ == Precision::fp32) {
    slot.gather = dp_.start_all_gather(mine, store_.params().data() + layout_.slot_begin(k), piece);
    return;
  }
  TRELLIS_REQUIRE(piece % 2 == 0, "UnitExchange: a 16-bit gather of an odd piece");
  kernels::to_half(gather_, kernels::ConstVector(mine, piece),
                   kernels::HalfVector(slot.gather_send16.data(), piece));
  slot.gather =
      dp_.start_all_gather(reinterpret_cast<const float*>(slot.gather_send16.data()),
                           reinterpret_cast<float*>(slot.gather_recv16.data()), piece / 2);
}

void UnitExchange::complete_gather(Slot& slot) {
  {  // The part of the gather compute did not hide (the timeline's exposed communication).
    const trace::Span waiting("comm", "wait for parameter gather", slot.param_unit, "unit");
    dp_.wait(slot.gather);
  }
  slot.gathering = false;
  const auto k = static_cast<std::size_t>(slot.param_unit);
  trace::complete_async("comm", "parameter gather", slot.gather_us, static_cast<std::int64_t>(k),
                        "unit");
  if (gather_ != Precision::fp32) {
    const std::size_t len = layout_.units[k].end - layout_.units[k].begin;
    kernels::from_half(gather_, kernels::ConstHalfVector(slot.gather_recv16.data(), len),
                       kernels::Vector(store_.params().data() + layout_.slot_begin(k), len));
  }
  store_.refresh_compute_range(layout_.units[k].begin, layout_.units[k].end);
}

void UnitExchange::widen(Slot& slot) {
  if (wire_ == Precision::fp32) return;
  const std::size_t piece = shards_[static_cast<std::size_t>(slot.grad_unit)].piece;
  kernels::from_half(wire_, kernels::ConstHalfVector(slot.recv16.data(), piece),
                     kernels::Vector(slot.received.data(), piece));
}

void UnitExchange::start_across(Slot& slot) {
  widen(slot);
  slot.across = true;
  slot.reduce = replica_->start_all_reduce(
      slot.received.data(), shards_[static_cast<std::size_t>(slot.grad_unit)].piece, ReduceOp::sum);
}

void UnitExchange::complete_reduction(Slot& slot) {
  if (replica_ == nullptr) {
    dp_.wait(slot.reduce);
    widen(slot);
  } else {
    // Start the replicas' all-reduces in queue order up to this slot's.
    while (!slot.across) {
      Slot& head = slots_[across_queue_.front()];
      dp_.wait(head.reduce);
      start_across(head);
      across_queue_.erase(across_queue_.begin());
    }
    replica_->wait(slot.reduce);
  }
  slot.reducing = false;
  const auto k = static_cast<std::size_t>(slot.grad_unit);
  trace::complete_async("comm", "gradient reduce-scatter", slot.reduce_us,
                        static_cast<std::int64_t>(k), "unit");
  const UnitShard& shard = shards_[k];
  kernels::axpy(1.0f, kernels::ConstVector(slot.received.data(), shard.piece),
                kernels::Vector(shard_grads_.data() + shard.shard_offset, shard.piece));
}

void UnitExchange::progress() {
  while (!across_queue_.empty() && dp_.test(slots_[across_queue_.front()].reduce)) {
    start_across(slots_[across_queue_.front()]);
    across_queue_.erase(across_queue_.begin());
  }
  for (Slot& slot : slots_) {
    if (slot.gathering) dp_.test(slot.gather);
    if (slot.reducing && slot.across) replica_->test(slot.reduce);
    if (slot.reducing && !slot.across && replica_ == nullptr) dp_.test(slot.reduce);
  }
}

void UnitExchange::finish_reduction() {
  for (Slot& slot : slots_)
    if (slot.reducing) complete_reduction(slot);
}

void UnitExchange::invalidate() {
  for (Slot& slot : slots_) {
    if (slot.gathering) {
      dp_.wait(slot.gather);
      slot.gathering = false;
    }
    slot.param_unit = -1;
  }
  // The first unit is needed first: its gather travels while the embeddings compute.
  if (stage_ >= 3 && !layout_.units.empty()) start_gather(0);
}

}  // namespace trellis
