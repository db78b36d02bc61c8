// Float views to and from host vectors, for the code off the hot path that reads or rewrites
// whole tensors on the host (export, tests). Contiguous views only: a 1-D view, or a row-major
// 2-D one read as its rows back to back.
#pragma once

#include "trellis/core/kokkos_types.hpp"

#include <vector>

namespace trellis {

template <class View>
std::vector<float> to_host_vector(const View& v) {
  std::vector<float> host(v.size());
  Kokkos::View<float*, HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> h(host.data(),
                                                                             host.size());
  Kokkos::View<const float*, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> flat(v.data(),
                                                                                     v.size());
  Kokkos::fence();
  Kokkos::deep_copy(h, flat);
  return host;
}

// values.size() == target.size().
inline void copy_from_host(const std::vector<float>& values, const FloatView& target) {
  Kokkos::View<const float*, HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> h(values.data(),
                                                                                   values.size());
  Kokkos::deep_copy(target, h);
}

}  // namespace trellis
