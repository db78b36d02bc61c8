// GradientSync: the bucket layout, and the ZeRO-2/3 shard (gradient_sync.hpp).
#include "trellis/core/error.hpp"
#include "trellis/kernels/vector_ops.hpp"
#include "trellis/parallel/gradient_sync.hpp"

#include <algorithm>

namespace trellis {

void GradientSync::build_buckets(std::size_t bucket_elems, const ZeroLayout* layout) {
  // Segments of the flat space in order: a unit is one bucket; any other range is cut into
  // buckets of bucket_elems (the last one shorter). grads_at / params_at: physical begins.
  struct Segment {
    std::size_t begin, end, physical;
    long unit;
  };
  const std::size_t numel = store_.buffer_size();
  std::vector<Segment> segments;
  if (layout == nullptr) {
    segments.push_back({0, numel, 0, -1});
  } else {
    for (std::size_t r = 0; r < layout->outer.size(); ++r)
      segments.push_back({layout->outer[r].begin, layout->outer[r].end, layout->outer_at[r], -1});
    for (std::size_t k = 0; k < layout->units.size(); ++k)
      segments.push_back({layout->units[k].begin, layout->units[k].end, layout->slot_begin(k),
                          static_cast<long>(k)});
    std::sort(segments.begin(), segments.end(),
              [](const Segment& a, const Segment& b) { return a.begin < b.begin; });
  }
  const bool placed_params = store_.params_placed();
  std::size_t shard_offset = 0;
  for (const Segment& segment : segments) {
    const std::size_t step = segment.unit >= 0 ? segment.end - segment.begin : bucket_elems;
    for (std::size_t begin = segment.begin; begin < segment.end; begin += step) {
      Bucket bucket;
      bucket.begin = begin;
      bucket.end = std::min(segment.end, begin + step);
      bucket.piece = (bucket.end - bucket.begin) / static_cast<std::size_t>(dp_size_);
      bucket.shard_offset = shard_offset;
      bucket.unit = segment.unit;
      bucket.grads_at = segment.physical + (begin - segment.begin);
      bucket.params_at = placed_params ? bucket.grads_at : begin;
      shard_offset += bucket.piece;
      buckets_.push_back(bucket);
    }
  }
}

void GradientSync::build_zero_shard(const ZeroLayout& layout) {
  const auto r = static_cast<std::size_t>(dp_.rank());
  std::vector<UnitExchange::UnitShard> shards(layout.units.size());
  for (const Bucket& bucket : buckets_)
    if (bucket.unit >= 0)
      shards[static_cast<std::size_t>(bucket.unit)] = {bucket.shard_offset, bucket.piece};
  if (params_sharded()) {
    // This rank's piece of every bucket: the outer ones from the whole outer parameters
    // finalize() drew, the units' drawn here from the counter RNG (no rank draws a unit whole).
    shard_params_ = FloatView("trellis::zero3::shard_params", update_size_);
    for (const Bucket& bucket : buckets_) {
      const std::size_t first = bucket.begin + r * bucket.piece, last = first + bucket.piece;
      float* out = shard_params_.data() + bucket.shard_offset;
      if (bucket.unit < 0) {
        kernels::copy(
            kernels::ConstVector(store_.params().data() + bucket.params_at + r * bucket.piece,
                                 bucket.piece),
            kernels::Vector(out, bucket.piece));
        continue;
      }
      for (std::size_t i = 0; i < store_.size(); ++i) {
        const nn::ParamInfo& info = store_.info(i);
        const std::size_t lo = std::max(first, info.offset);
        const std::size_t hi = std::min(last, info.offset + info.numel);
        if (lo < hi)
          store_.initialize_range(i, lo - info.offset, hi - info.offset,
                                  kernels::Vector(out + (lo - first), hi - lo));
      }
    }
  }
  exchange_ =
      std::make_unique<UnitExchange>(dp_, options_.replica, store_, layout, options_.zero,
                                     std::move(shards), shard_params_, shard_grads_, options_.wire,
                                     options_.gather);
}

}  // namespace trellis
