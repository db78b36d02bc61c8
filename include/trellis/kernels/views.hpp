// View types the kernels take, and shape checks they share.
//
// Kernels take unmanaged views: a FloatView, a subview or a window built from a pointer all
// convert to these without reference counting, so the training step can call kernels on raw
// windows of its preallocated buffers without constructing managed Views.
#pragma once

#include "trellis/core/error.hpp"
#include "trellis/core/kokkos_types.hpp"

#include <cstdint>
#include <string>

namespace trellis::kernels {

using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
using Vector = Kokkos::View<float*, MemSpace, Unmanaged>;
using ConstVector = Kokkos::View<const float*, MemSpace, Unmanaged>;
using ConstLabels = Kokkos::View<const std::int32_t*, MemSpace, Unmanaged>;

// The policy every kernel launches with: 64-bit indices, so [capacity * features] buffers
// beyond 2^31 elements index correctly.
using Range = Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>;

// "[3, 4]" for error messages.
template <class View>
std::string extents_string(const View& v) {
  std::string s = "[";
  const unsigned rank = static_cast<unsigned>(View::rank);
  for (unsigned d = 0; d < rank; ++d) {
    if (d) s += ", ";
    s += std::to_string(v.extent(d));
  }
  return s + "]";
}

// Throws trellis::Error naming the kernel when two views differ in shape.
template <class A, class B>
void require_same_shape(const A& a, const B& b, const char* kernel) {
  // static_cast: View::rank is an enum in Kokkos 3 and an integral constant in Kokkos 4.
  const unsigned rank = static_cast<unsigned>(A::rank);
  bool same = rank == static_cast<unsigned>(B::rank);
  for (unsigned d = 0; same && d < rank; ++d) same = a.extent(d) == b.extent(d);
  if (!same) {
    throw Error(std::string(kernel) + ": shape mismatch " + extents_string(a) + " vs " +
                extents_string(b));
  }
}

// Rows [0, n) of a row-major matrix: a window, no copy, no allocation.
inline ConstMatrix first_rows(const ConstMatrix& m, int n) {
  TRELLIS_REQUIRE(
      n >= 0 && static_cast<std::size_t>(n) <= m.extent(0),
      "first_rows: asked for " + std::to_string(n) + " rows of a " + extents_string(m) + " matrix");
  return ConstMatrix(m.data(), static_cast<std::size_t>(n), m.extent(1));
}
inline Matrix first_rows(const Matrix& m, int n) {
  TRELLIS_REQUIRE(
      n >= 0 && static_cast<std::size_t>(n) <= m.extent(0),
      "first_rows: asked for " + std::to_string(n) + " rows of a " + extents_string(m) + " matrix");
  return Matrix(m.data(), static_cast<std::size_t>(n), m.extent(1));
}

// The elements of a (contiguous) matrix as one flat vector.
inline Vector flat(const Matrix& m) { return Vector(m.data(), m.size()); }
inline ConstVector flat(const ConstMatrix& m) { return ConstVector(m.data(), m.size()); }

}  // namespace trellis::kernels
