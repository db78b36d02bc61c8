#include "trellis/parallel/gradient_sync.hpp"

#include "shared_reduction.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/host_simd.hpp"
#include "trellis/core/trace.hpp"
#include "trellis/kernels/vector_ops.hpp"

#include <algorithm>
#include <cstring>
#include <string>

namespace trellis {

std::size_t GradientSync::padding_multiple(int dp_size) {
  TRELLIS_REQUIRE(dp_size >= 1, "GradientSync: dp size " + std::to_string(dp_size));
  return static_cast<std::size_t>(dp_size) * nn::ParameterStore::kAlignment;
}

std::size_t GradientSync::shared_floats(std::size_t buffer_size, bool zero1) {
  return zero1 ? 2 * buffer_size : buffer_size;
}

GradientSync::GradientSync(Communicator& dp, nn::ParameterStore& store,
                           const GradientSyncOptions& options)
    : dp_(dp), store_(store), options_(options), dp_size_(dp.size()), zero1_(options.zero >= 1) {
  if (!store.finalized())
    throw Error("GradientSync: the parameter store must be finalized before the gradient sync");
  const std::size_t multiple = padding_multiple(dp_size_);
  const std::size_t numel = store.buffer_size();
  if (numel % multiple != 0) {
    throw Error("GradientSync: the parameter buffer holds " + std::to_string(numel) +
                " floats, not a multiple of " + std::to_string(multiple) + " (dp " +
                std::to_string(dp_size_) + " x " + std::to_string(nn::ParameterStore::kAlignment) +
                "); call store.pad_to_multiple(GradientSync::padding_multiple(dp)) before "
                "finalize()");
  }
  // Whole multiples only, so every bucket splits evenly over the dp ranks.
  // Shared memory: one bucket, so that each rank's shard is one contiguous slice of the buffers.
  const std::size_t bucket_elems =
      options.shared != nullptr
          ? std::max(multiple, numel)
          : std::max(multiple, options.bucket_bytes / sizeof(float) / multiple * multiple);
  ZeroLayout layout;
  if (options_.zero >= 2) {
    if (options.shared != nullptr || options.powersgd.rank > 0)
      throw Error("GradientSync: ZeRO-" + std::to_string(options_.zero) +
                  " needs the communicator exchange and no PowerSGD");
    layout = zero_layout(store.units(), numel);
  } else if (options.replica != nullptr) {
    throw Error("GradientSync: hybrid sharding (a replica group) needs ZeRO-2 or ZeRO-3");
    if (store.grad_floats() != layout.physical_floats() ||
        (options_.zero >= 3) != store.params_placed())
      throw Error("GradientSync: the store is not placed for ZeRO-" +
                  std::to_string(options_.zero) + " (ParameterStore::place with zero_layout)");
  }
  build_buckets(bucket_elems, options_.zero >= 2 ? &layout : nullptr);
  const std::size_t shard_offset = numel / static_cast<std::size_t>(dp_size_);
  requests_.assign(buckets_.size(), CommRequest{});
  launched_us_.assign(buckets_.size(), -1.0);
  order_.assign(buckets_.size(), 0);
  first_started_ = buckets_.size();
  NodeSharedWindow* shared = options_.shared;
  if (shared != nullptr) {
    const std::size_t need = shared_floats(numel, zero1_);
    if (!kHostMemory || dp.backend() != CommBackend::mpi || shared->size() != dp_size_ ||
        shared->rank() != dp.rank() || shared->floats_per_rank() < need ||
        store.grads().data() != shared->part(dp.rank()) ||
        (zero1_ && store.params().data() != shared->part(dp.rank()) + numel))
      throw Error("GradientSync: the shared window (" + std::to_string(shared->size()) +
                  " ranks x " + std::to_string(shared->floats_per_rank()) +
                  " floats) does not hold this store's gradients for " + std::to_string(dp_size_) +
                  " MPI dp ranks x " + std::to_string(need) + " floats in host memory");
    peer_grads_ = shared->parts();
    for (float* part : peer_grads_) peer_params_.push_back(part + numel);
    own_grads_.push_back(store.grads().data());
  }
  if (options_.powersgd.rank > 0 && (shared != nullptr || options_.wire != Precision::fp32))
    throw Error("GradientSync: PowerSGD needs the communicator exchange with an fp32 wire");
  if (options_.wire != Precision::fp32 && shared != nullptr)
    throw Error(std::string("GradientSync: a ") + precision_name(options_.wire) +
                " wire needs the communicator exchange, not node shared memory");
  if (zero1_ && shared != nullptr) {
    // The shard is this rank's slice of its own buffers: the update writes the parameters in
    // place, the peers' gradients are summed into the own ones in place, nothing is copied.
    update_size_ = shard_offset;  // numel / dp: the one bucket's piece
    const std::size_t first = static_cast<std::size_t>(dp.rank()) * update_size_;
    shard_grads_ = FloatView(store.grads().data() + first, update_size_);
  } else if (zero1_) {
    update_size_ = shard_offset;  // numel / dp
    shard_grads_ = FloatView("trellis::zero1::shard_grads", update_size_);
    if (options_.zero >= 2) build_zero_shard(layout);
  } else {
    update_size_ = numel;
  }
  // The parameters of each piece of the update space, in place in store.params(): element i
  // of a piece at shard offset s and flat offset f is params[f + i - s] (f >= s always).
  for (const ShardRange& range : shard_ranges()) {
    if (params_sharded()) {  // one window: the shard buffer itself
      windows_.push_back(ParamWindow{shard_params_, 0, update_size_});
      break;
    }
    const std::size_t length = range.flat_end - range.flat_begin;
    windows_.push_back(
        ParamWindow{FloatView(store.params().data() + (range.flat_begin - range.shard_offset),
                              range.shard_offset + length),
                    range.shard_offset, range.shard_offset + length});
  }
  if (options_.wire != Precision::fp32) {
    wire_ = kernels::HalfView("trellis::grad_wire", store.grad_floats());
    if (zero1_) shard_wire_ = kernels::HalfView("trellis::grad_wire_shard", update_size_);
  }
  if (options_.powersgd.rank > 0)
    powersgd_ = std::make_unique<PowerSgd>(dp, store, options_.powersgd);
  store_.set_grad_listener(this);
}

void GradientSync::set_step(std::int64_t step) {
  powersgd_now_ = powersgd_ != nullptr && step >= options_.powersgd.start_step;
  if (exchange_) kernels::fill(kernels::Vector(shard_grads_.data(), update_size_), 0.0f);
}

GradientSync::~GradientSync() { store_.set_grad_listener(nullptr); }

void GradientSync::begin_backward(bool last_micro_batch) {
  TRELLIS_REQUIRE(first_started_ == buckets_.size(),
                  "GradientSync::begin_backward(): buckets of the last micro-batch are still in "
                  "flight; call finish_reduction() first");
  armed_ = last_micro_batch;
}

void GradientSync::start_bucket(std::size_t b, bool gather) {
  // Bounded number of outstanding requests: complete the oldest first.
  while (tail_ - head_ >= kMaxInFlight) {
    const std::size_t oldest = order_[head_++];
    dp_.wait(requests_[oldest]);
    retire(oldest);
  }
  const Bucket& bucket = buckets_[b];
  float* grads = store_.grads().data();
  const Precision wire = options_.wire;
  launched_us_[b] = trace::recording() ? trace::now_us() : -1.0;
  if (gather) {
    // In place: this rank's piece of the bucket is where the update wrote it.
    float* bucket_params = store_.params().data() + bucket.params_at;
    const float* own = params_sharded()
                           ? shard_params_.data() + bucket.shard_offset
                           : bucket_params + static_cast<std::size_t>(dp_.rank()) * bucket.piece;
    requests_[b] = dp_.start_all_gather(own, bucket_params, bucket.piece);
  } else if (wire != Precision::fp32) {
    const std::size_t len = bucket.end - bucket.begin;
    std::uint16_t* words = wire_.data() + bucket.grads_at;
    kernels::to_half(wire, kernels::ConstVector(grads + bucket.grads_at, len),
                     kernels::HalfVector(words, len));
    requests_[b] = zero1_ ? dp_.start_reduce_scatter_half(
                                words, shard_wire_.data() + bucket.shard_offset, bucket.piece, wire)
                          : dp_.start_all_reduce_half(words, len, wire);
  } else if (zero1_) {
    requests_[b] =
        dp_.start_reduce_scatter(grads + bucket.grads_at, shard_grads_.data() + bucket.shard_offset,
                                 bucket.piece, ReduceOp::sum);
  } else {
    requests_[b] =
        dp_.start_all_reduce(grads + bucket.begin, bucket.end - bucket.begin, ReduceOp::sum);
  }
  order_[tail_++] = b;
}

void GradientSync::retire(std::size_t b) {
  // From launch to the moment its completion was seen (a wait, or a poll between layers).
  trace::complete_async("comm", gathering_ ? "parameter all-gather" : "gradient bucket reduction",
                        launched_us_[b], static_cast<std::int64_t>(b), "bucket");
  if (gathering_ || options_.wire == Precision::fp32) return;
  const Bucket& bucket = buckets_[b];
  if (zero1_) {
    const std::size_t s = bucket.shard_offset;
    kernels::from_half(options_.wire,
                       kernels::ConstHalfVector(shard_wire_.data() + s, bucket.piece),
                       kernels::Vector(shard_grads_.data() + s, bucket.piece));
  } else {
    const std::size_t len = bucket.end - bucket.begin;
    kernels::from_half(options_.wire, kernels::ConstHalfVector(wire_.data() + bucket.begin, len),
                       kernels::Vector(store_.grads().data() + bucket.begin, len));
  }
}

double GradientSync::wire_bytes_per_step() const {
  if (powersgd_now_) {  // two all-reduces of P + uncompressed, and Q
    const double p = dp_size_;
    return 2.0 * (p - 1) / p * static_cast<double>(powersgd_->floats_per_step()) * sizeof(float);
  }
  return fp32_bytes_per_step() * static_cast<double>(precision_bytes(options_.wire)) / 4.0;
}

double GradientSync::fp32_bytes_per_step() const {
  const double p = dp_size_;
  const double fraction = (zero1_ && options_.shared == nullptr ? 1.0 : 2.0) * (p - 1) / p;
  return fraction * static_cast<double>(store_.buffer_size()) * sizeof(float);
}

void GradientSync::grads_final_from(std::size_t offset) {
  if (exchange_) return;  // the units reduce themselves; the outer buckets after backward
  if (!armed_ || !options_.overlap || options_.shared != nullptr || powersgd_now_) return;
  offset = std::max(offset, hold_below_);
  // Buckets become final from the top down: start each one lying wholly at >= offset.
  while (first_started_ > 0 && buckets_[first_started_ - 1].begin >= offset) {
    --first_started_;
    start_bucket(first_started_, false);
  }
  // Let MPI progress what is in flight; retire the completed prefix.
  for (std::size_t i = head_; i < tail_; ++i) dp_.test(requests_[order_[i]]);
  while (head_ < tail_ && !requests_[order_[head_]].pending) retire(order_[head_++]);
}

void GradientSync::wait_all() {
  while (head_ < tail_) {
    const std::size_t b = order_[head_++];
    dp_.wait(requests_[b]);
    retire(b);
  }
  head_ = 0;
  tail_ = 0;
}

void GradientSync::finish_reduction() {
  if (options_.shared != nullptr) {
    reduce_shared();
    started_early_ = 0;
    armed_ = false;
    return;
  }
  if (powersgd_now_) {
    powersgd_->reduce();
    if (zero1_) {  // this rank's pieces of the (approximate) sum: the shard
      const auto r = static_cast<std::size_t>(dp_.rank());
      for (const Bucket& bucket : buckets_) {
        const std::size_t first = bucket.begin + r * bucket.piece;
        Kokkos::deep_copy(
            slice(shard_grads_, bucket.shard_offset, bucket.shard_offset + bucket.piece),
            slice(store_.grads(), first, first + bucket.piece));
      }
    }
    started_early_ = 0;
    armed_ = false;
    return;
  }
  started_early_ = buckets_.size() - first_started_;
  if (exchange_) exchange_->finish_reduction();
  while (first_started_ > 0) {
    --first_started_;
    if (buckets_[first_started_].unit < 0) start_bucket(first_started_, false);
  }
  wait_all();
  if (options_.replica != nullptr)  // hybrid sharding: the outer pieces over the replicas too
    for (const Bucket& bucket : buckets_)
      if (bucket.unit < 0)
        options_.replica->all_reduce(shard_grads_.data() + bucket.shard_offset, bucket.piece,
                                     ReduceOp::sum);
  first_started_ = buckets_.size();
  armed_ = false;
}

const FloatView& GradientSync::update_grads() const {
  return zero1_ ? shard_grads_ : store_.grads();
}

ConstMaskView GradientSync::gather_shard(ConstMaskView full) const {
  TRELLIS_REQUIRE(full.extent(0) == store_.buffer_size(),
                  "GradientSync::gather_shard: mask of " + std::to_string(full.extent(0)) +
                      " elements, the parameter buffer holds " +
                      std::to_string(store_.buffer_size()));
  if (!zero1_) return full;
  MaskView shard(std::string("trellis::zero1::") + full.label(), update_size_);
  const auto r = static_cast<std::size_t>(dp_.rank());
  for (const Bucket& bucket : buckets_) {
    const std::size_t first = bucket.begin + r * bucket.piece;
    Kokkos::deep_copy(slice(shard, bucket.shard_offset, bucket.shard_offset + bucket.piece),
                      slice(full, first, first + bucket.piece));
  }
  return shard;
}

std::vector<GradientSync::ShardRange> GradientSync::shard_ranges() const {
  if (!zero1_) return {ShardRange{0, store_.buffer_size(), 0}};
  const auto r = static_cast<std::size_t>(dp_.rank());
  std::vector<ShardRange> ranges;
  for (const Bucket& bucket : buckets_) {
    const std::size_t first = bucket.begin + r * bucket.piece;
    ranges.push_back({first, first + bucket.piece, bucket.shard_offset});
  }
  return ranges;
}

void GradientSync::finish_update() {
  if (!zero1_) return;
  TRELLIS_REQUIRE(first_started_ == buckets_.size(),
                  "GradientSync::finish_update() while a reduction is in flight");
  if (options_.shared != nullptr) {
    gather_shared();
    return;
  }
  gathering_ = true;
  for (std::size_t b = 0; b < buckets_.size(); ++b)
    if (!params_sharded() || buckets_[b].unit < 0) start_bucket(b, true);
  wait_all();
  gathering_ = false;
  if (params_sharded()) exchange_->invalidate();  // the units gather when next used
}

void GradientSync::reduce_shared() {
  options_.shared->barrier();  // every rank's gradients are final
  const auto r = static_cast<std::size_t>(dp_.rank());
  if (zero1_) {
    // Slice r (the one bucket's piece r), summed over the peers in place: the shard.
    const std::size_t piece = update_size_;
    shared_reduction::sum_into(peer_grads_, r * piece, piece, own_grads_, r * piece);
  } else {
    // Slice r of the whole buffer, summed and written back into every peer's gradients.
    const std::size_t piece = store_.buffer_size() / static_cast<std::size_t>(dp_size_);
    shared_reduction::sum_into(peer_grads_, r * piece, piece, peer_grads_, r * piece);
  }
  options_.shared->barrier();  // no rank reads or writes another's gradients from here on
}

void GradientSync::gather_shared() {
  options_.shared->barrier();  // every rank's slice of the parameters is updated
  float* params = store_.params().data();
  const std::size_t piece = update_size_;
  const auto r = static_cast<std::size_t>(dp_.rank());
  for (std::size_t p = 0; p < peer_params_.size(); ++p)
    if (p != r) std::memcpy(params + p * piece, peer_params_[p] + p * piece, piece * sizeof(float));
  options_.shared->barrier();  // no rank writes its slice again before every peer copied it
}

}  // namespace trellis
