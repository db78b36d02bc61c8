#include "trellis/train/input/batch_buffers.hpp"

#include "trellis/core/error.hpp"

#include <string>

namespace trellis {

namespace {
std::size_t size_of(std::int64_t a, std::int64_t b) { return static_cast<std::size_t>(a * b); }

// An empty view for an empty buffer: Kokkos allocates (and reports) a block even for zero
// elements, which the memory plan would not count.
template <class View>
View buffer(const char* label, std::size_t size) {
  return size == 0 ? View() : View(std::string(label), size);
}
}  // namespace

BatchBuffers::BatchBuffers(std::int64_t capacity_samples, std::int64_t numel,
                           std::int64_t tokens_per_sample)
    : capacity(capacity_samples),
      feature_numel(numel),
      seq_len(tokens_per_sample),
      rows_per_sample(tokens_per_sample > 0 ? tokens_per_sample : 1),
      features(buffer<FloatView>("trellis::batch::features", size_of(capacity_samples, numel))),
      tokens(
          buffer<IntView>("trellis::batch::tokens", size_of(capacity_samples, tokens_per_sample))),
      targets(
          buffer<IntView>("trellis::batch::targets", size_of(capacity_samples, rows_per_sample))),
      host_features(Kokkos::create_mirror_view(features)),
      host_tokens(Kokkos::create_mirror_view(tokens)),
      host_targets(Kokkos::create_mirror_view(targets)) {}

void BatchBuffers::upload(std::int64_t samples) {
  TRELLIS_REQUIRE(samples >= 0 && samples <= capacity, "batch larger than its buffers");
  if (samples == 0) return;
  if (feature_numel > 0) {
    const std::size_t n = size_of(samples, feature_numel);
    Kokkos::deep_copy(slice(features, 0, n), slice(host_features, 0, n));
  }
  if (seq_len > 0) {
    const std::size_t n = size_of(samples, seq_len);
    Kokkos::deep_copy(slice(tokens, 0, n), slice(host_tokens, 0, n));
  }
  const std::size_t n = size_of(samples, rows_per_sample);
  Kokkos::deep_copy(slice(targets, 0, n), slice(host_targets, 0, n));
}

ConstMatrix BatchBuffers::feature_rows(std::int64_t first, std::int64_t count) const {
  return ConstMatrix(features.data() + first * feature_numel, static_cast<std::size_t>(count),
                     static_cast<std::size_t>(feature_numel));
}

kernels::ConstLabels BatchBuffers::token_rows(std::int64_t first, std::int64_t count) const {
  return kernels::ConstLabels(tokens.data() + first * seq_len,
                              static_cast<std::size_t>(count * seq_len));
}

kernels::ConstLabels BatchBuffers::target_rows(std::int64_t first, std::int64_t count) const {
  return kernels::ConstLabels(targets.data() + first * rows_per_sample,
                              static_cast<std::size_t>(count * rows_per_sample));
}

MicroBatch BatchBuffers::micro_batch(std::int64_t first, std::int64_t count) const {
  MicroBatch mb;
  if (seq_len > 0)
    mb.input.tokens = token_rows(first, count);
  else
    mb.input.features = feature_rows(first, count);
  mb.targets = target_rows(first, count);
  mb.samples = static_cast<int>(count);
  return mb;
}

}  // namespace trellis
