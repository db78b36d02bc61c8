// The execution and memory spaces Trellis runs in, chosen by the Kokkos build, and the View
// aliases every layer uses. Buffers are flat 1-D Views; 2-D access goes through as_matrix().
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>

namespace trellis {

using ExecSpace = Kokkos::DefaultExecutionSpace;
using MemSpace = ExecSpace::memory_space;
using HostSpace = Kokkos::HostSpace;

using FloatView = Kokkos::View<float*, MemSpace>;
using ConstFloatView = Kokkos::View<const float*, MemSpace>;
using IntView = Kokkos::View<std::int32_t*, MemSpace>;
using HostFloatView = Kokkos::View<float*, HostSpace>;
using HostIntView = Kokkos::View<std::int32_t*, HostSpace>;
// A 0/1 flag per parameter element (which elements decay, which count in the norm): one
// byte each, since a float mask would take as much memory as the parameters themselves.
using MaskView = Kokkos::View<std::uint8_t*, MemSpace>;
using ConstMaskView = Kokkos::View<const std::uint8_t*, MemSpace>;

// Row-major [rows, cols] window onto the first rows*cols elements of a flat buffer.
using Matrix =
    Kokkos::View<float**, Kokkos::LayoutRight, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
using ConstMatrix = Kokkos::View<const float**, Kokkos::LayoutRight, MemSpace,
                                 Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

inline Matrix as_matrix(const FloatView& flat, int rows, int cols) {
  return Matrix(flat.data(), rows, cols);
}
inline ConstMatrix as_const_matrix(const ConstFloatView& flat, int rows, int cols) {
  return ConstMatrix(flat.data(), rows, cols);
}

// Half-open range [begin, end) of a flat View, without reference-count traffic in hot loops.
template <class View>
inline auto slice(const View& view, std::size_t begin, std::size_t end) {
  return Kokkos::subview(view, Kokkos::make_pair(begin, end));
}

}  // namespace trellis
