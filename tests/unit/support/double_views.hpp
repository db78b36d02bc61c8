// Double-precision device buffers in kernel tests (BatchNorm's sums and statistics).
#pragma once

#include "trellis/core/kokkos_types.hpp"

#include <vector>

namespace trellis::test {

using DoubleView = Kokkos::View<double*, MemSpace>;

inline std::vector<double> doubles_to_host(const DoubleView& v) {
  auto h = Kokkos::create_mirror_view(v);
  Kokkos::deep_copy(h, v);
  return std::vector<double>(h.data(), h.data() + h.extent(0));
}

}  // namespace trellis::test
