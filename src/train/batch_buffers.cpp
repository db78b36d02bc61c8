#include "trellis/train/batch_buffers.hpp"

#include "trellis/core/error.hpp"

namespace trellis {

BatchBuffers::BatchBuffers(std::int64_t capacity_rows, std::int64_t numel)
    : capacity(capacity_rows),
      sample_numel(numel),
      inputs("trellis::batch::inputs", static_cast<std::size_t>(capacity_rows * numel)),
      labels("trellis::batch::labels", static_cast<std::size_t>(capacity_rows)),
      host_inputs(Kokkos::create_mirror_view(inputs)),
      host_labels(Kokkos::create_mirror_view(labels)) {}

void BatchBuffers::upload(std::int64_t rows) {
  TRELLIS_REQUIRE(rows >= 0 && rows <= capacity, "batch larger than its buffers");
  if (rows == 0) return;
  const auto n = static_cast<std::size_t>(rows);
  Kokkos::deep_copy(slice(inputs, 0, n * static_cast<std::size_t>(sample_numel)),
                    slice(host_inputs, 0, n * static_cast<std::size_t>(sample_numel)));
  Kokkos::deep_copy(slice(labels, 0, n), slice(host_labels, 0, n));
}

ConstMatrix BatchBuffers::input_rows(std::int64_t first, std::int64_t rows) const {
  return ConstMatrix(inputs.data() + first * sample_numel, static_cast<std::size_t>(rows),
                     static_cast<std::size_t>(sample_numel));
}

kernels::ConstLabels BatchBuffers::label_rows(std::int64_t first, std::int64_t rows) const {
  return kernels::ConstLabels(labels.data() + first, static_cast<std::size_t>(rows));
}

}  // namespace trellis
