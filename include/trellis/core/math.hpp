// Device-callable math that compiles against Kokkos 3.4 (functions in Kokkos::Experimental)
// and Kokkos >= 3.7 (functions in Kokkos). Kernels call trellis::math::exp etc. only.
#pragma once

#include <Kokkos_Core.hpp>

namespace trellis::math {

#if KOKKOS_VERSION >= 30700
namespace kmath = ::Kokkos;
#else
namespace kmath = ::Kokkos::Experimental;
#endif

template <class T>
KOKKOS_INLINE_FUNCTION T sqrt(T x) {
  return kmath::sqrt(x);
}
template <class T>
KOKKOS_INLINE_FUNCTION T exp(T x) {
  return kmath::exp(x);
}
template <class T>
KOKKOS_INLINE_FUNCTION T log(T x) {
  return kmath::log(x);
}
template <class T>
KOKKOS_INLINE_FUNCTION T cos(T x) {
  return kmath::cos(x);
}
template <class T>
KOKKOS_INLINE_FUNCTION T tanh(T x) {
  return kmath::tanh(x);
}
template <class T>
KOKKOS_INLINE_FUNCTION T erf(T x) {
  return kmath::erf(x);
}
template <class T>
KOKKOS_INLINE_FUNCTION T fabs(T x) {
  return kmath::fabs(x);
}
template <class T>
KOKKOS_INLINE_FUNCTION T pow(T x, T y) {
  return kmath::pow(x, y);
}
template <class T>
KOKKOS_INLINE_FUNCTION bool isfinite(T x) {
  return kmath::isfinite(x);
}

}  // namespace trellis::math
