#include "trellis/parallel/gradient_sync.hpp"

#include "trellis/core/error.hpp"

#include <algorithm>
#include <string>

namespace trellis {

std::size_t GradientSync::padding_multiple(int dp_size) {
  TRELLIS_REQUIRE(dp_size >= 1, "GradientSync: dp size " + std::to_string(dp_size));
  return static_cast<std::size_t>(dp_size) * nn::ParameterStore::kAlignment;
}

GradientSync::GradientSync(Communicator& dp, nn::ParameterStore& store,
                           const GradientSyncOptions& options)
    : dp_(dp), store_(store), options_(options), dp_size_(dp.size()) {
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
  const std::size_t bucket_elems =
      std::max(multiple, options.bucket_bytes / sizeof(float) / multiple * multiple);
  std::size_t shard_offset = 0;
  for (std::size_t begin = 0; begin < numel; begin += bucket_elems) {
    Bucket bucket;
    bucket.begin = begin;
    bucket.end = std::min(numel, begin + bucket_elems);
    bucket.piece = (bucket.end - bucket.begin) / static_cast<std::size_t>(dp_size_);
    bucket.shard_offset = shard_offset;
    shard_offset += bucket.piece;
    buckets_.push_back(bucket);
  }
  requests_.assign(buckets_.size(), CommRequest{});
  order_.assign(buckets_.size(), 0);
  first_started_ = buckets_.size();
  if (options_.zero1) {
    update_size_ = shard_offset;  // numel / dp
    shard_params_ = FloatView("trellis::zero1::master_params", update_size_);
    shard_grads_ = FloatView("trellis::zero1::shard_grads", update_size_);
    load_shard_from_params();
  } else {
    update_size_ = numel;
  }
  store_.set_grad_listener(this);
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
  while (tail_ - head_ >= kMaxInFlight) dp_.wait(requests_[order_[head_++]]);
  const Bucket& bucket = buckets_[b];
  float* grads = store_.grads().data();
  if (gather) {
    requests_[b] = dp_.start_all_gather(shard_params_.data() + bucket.shard_offset,
                                        store_.params().data() + bucket.begin, bucket.piece);
  } else if (options_.zero1) {
    requests_[b] =
        dp_.start_reduce_scatter(grads + bucket.begin, shard_grads_.data() + bucket.shard_offset,
                                 bucket.piece, ReduceOp::sum);
  } else {
    requests_[b] =
        dp_.start_all_reduce(grads + bucket.begin, bucket.end - bucket.begin, ReduceOp::sum);
  }
  order_[tail_++] = b;
}

void GradientSync::grads_final_from(std::size_t offset) {
  if (!armed_ || !options_.overlap) return;
  offset = std::max(offset, hold_below_);
  // Buckets become final from the top down: start each one lying wholly at >= offset.
  while (first_started_ > 0 && buckets_[first_started_ - 1].begin >= offset) {
    --first_started_;
    start_bucket(first_started_, false);
  }
  // Let MPI progress what is in flight; retire the completed prefix.
  for (std::size_t i = head_; i < tail_; ++i) dp_.test(requests_[order_[i]]);
  while (head_ < tail_ && !requests_[order_[head_]].pending) ++head_;
}

void GradientSync::wait_all() {
  while (head_ < tail_) dp_.wait(requests_[order_[head_++]]);
  head_ = 0;
  tail_ = 0;
}

void GradientSync::finish_reduction() {
  started_early_ = buckets_.size() - first_started_;
  while (first_started_ > 0) {
    --first_started_;
    start_bucket(first_started_, false);
  }
  wait_all();
  first_started_ = buckets_.size();
  armed_ = false;
}

const FloatView& GradientSync::update_params() const {
  return options_.zero1 ? shard_params_ : store_.params();
}

const FloatView& GradientSync::update_grads() const {
  return options_.zero1 ? shard_grads_ : store_.grads();
}

ConstFloatView GradientSync::gather_shard(ConstFloatView full) const {
  TRELLIS_REQUIRE(full.extent(0) == store_.buffer_size(),
                  "GradientSync::gather_shard: view of " + std::to_string(full.extent(0)) +
                      " floats, the parameter buffer holds " +
                      std::to_string(store_.buffer_size()));
  if (!options_.zero1) return full;
  FloatView shard(std::string("trellis::zero1::") + full.label(), update_size_);
  const auto r = static_cast<std::size_t>(dp_.rank());
  for (const Bucket& bucket : buckets_) {
    const std::size_t first = bucket.begin + r * bucket.piece;
    Kokkos::deep_copy(slice(shard, bucket.shard_offset, bucket.shard_offset + bucket.piece),
                      slice(full, first, first + bucket.piece));
  }
  return shard;
}

std::vector<GradientSync::ShardRange> GradientSync::shard_ranges() const {
  if (!options_.zero1) return {ShardRange{0, store_.buffer_size(), 0}};
  const auto r = static_cast<std::size_t>(dp_.rank());
  std::vector<ShardRange> ranges;
  for (const Bucket& bucket : buckets_) {
    const std::size_t first = bucket.begin + r * bucket.piece;
    ranges.push_back({first, first + bucket.piece, bucket.shard_offset});
  }
  return ranges;
}

void GradientSync::load_shard_from_params() {
  if (!options_.zero1) return;
  const auto r = static_cast<std::size_t>(dp_.rank());
  for (const Bucket& bucket : buckets_) {
    const std::size_t first = bucket.begin + r * bucket.piece;
    Kokkos::deep_copy(slice(shard_params_, bucket.shard_offset, bucket.shard_offset + bucket.piece),
                      slice(store_.params(), first, first + bucket.piece));
  }
}

void GradientSync::finish_update() {
  if (!options_.zero1) return;
  TRELLIS_REQUIRE(first_started_ == buckets_.size(),
                  "GradientSync::finish_update() while a reduction is in flight");
  for (std::size_t b = 0; b < buckets_.size(); ++b) start_bucket(b, true);
  wait_all();
}

}  // namespace trellis
