// The input and label buffers of one rank, sized once for the largest batch it will read.
// The reader writes the host mirrors; upload() copies them to the device (a no-op on host
// backends, where mirror and device view are the same allocation).
#pragma once

#include "trellis/core/kokkos_types.hpp"
#include "trellis/kernels/views.hpp"

#include <cstdint>

namespace trellis {

struct BatchBuffers {
  BatchBuffers(std::int64_t capacity, std::int64_t sample_numel);

  std::int64_t capacity, sample_numel;
  FloatView inputs;                   // [capacity * sample_numel] device
  IntView labels;                     // [capacity] device
  FloatView::HostMirror host_inputs;  // [capacity * sample_numel]
  IntView::HostMirror host_labels;    // [capacity]

  void upload(std::int64_t rows);
  // Rows [first, first + rows) as the matrix a model consumes.
  ConstMatrix input_rows(std::int64_t first, std::int64_t rows) const;
  kernels::ConstLabels label_rows(std::int64_t first, std::int64_t rows) const;
};

}  // namespace trellis
