#include "trellis/kernels/swiglu.hpp"

#include "trellis/core/code_path.hpp"
#include "trellis/core/fast_math.hpp"
#include "trellis/core/host_simd.hpp"
#include "trellis/core/kernel_label.hpp"

#include <string>

namespace trellis::kernels {

namespace {

using Index = std::int64_t;

KOKKOS_INLINE_FUNCTION float sigmoid(float x) { return 1.0f / (1.0f + math::fast_exp(-x)); }

TRELLIS_HOST_CLONES
void host_forward(const float* __restrict gate_up, float* __restrict h, Index rows, Index f) {
  for (Index r = 0; r < rows; ++r) {
    const float* __restrict gate = gate_up + r * 2 * f;
    const float* __restrict up = gate + f;
    float* __restrict hr = h + r * f;
    for (Index j = 0; j < f; ++j) hr[j] = gate[j] * sigmoid(gate[j]) * up[j];
  }
}

TRELLIS_HOST_CLONES
void host_backward(const float* __restrict gate_up, const float* __restrict dh,
                   float* __restrict dgate_up, Index rows, Index f) {
  for (Index r = 0; r < rows; ++r) {
    const float* __restrict gate = gate_up + r * 2 * f;
    const float* __restrict up = gate + f;
    const float* __restrict dhr = dh + r * f;
    float* __restrict dgate = dgate_up + r * 2 * f;
    float* __restrict dup = dgate + f;
    for (Index j = 0; j < f; ++j) {
      const float s = sigmoid(gate[j]);
      dgate[j] = dhr[j] * up[j] * s * (1.0f + gate[j] * (1.0f - s));
      dup[j] = dhr[j] * gate[j] * s;
    }
  }
}

void check(const char* who, const ConstMatrix& gate_up, std::size_t rows, std::size_t cols) {
  TRELLIS_REQUIRE(
      gate_up.extent(1) % 2 == 0 && rows == gate_up.extent(0) && 2 * cols == gate_up.extent(1),
      std::string(who) + ": gate_up " + extents_string(gate_up) + ", h [" + std::to_string(rows) +
          ", " + std::to_string(cols) + "] (need gate_up [n, 2f] and h [n, f])");
}

}  // namespace

void swiglu_forward(ConstMatrix gate_up, Matrix h) {
  check("swiglu_forward", gate_up, h.extent(0), h.extent(1));
  const Index rows = static_cast<Index>(h.extent(0)), f = static_cast<Index>(h.extent(1));
  if constexpr (kHostKernels) {
    host_forward(gate_up.data(), h.data(), rows, f);
    return;
  }
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::swiglu::fwd"), Range(0, rows * f),
      KOKKOS_LAMBDA(const Index e) {
        const Index r = e / f, j = e % f;
        const float g = gate_up(r, j);
        h(r, j) = g * sigmoid(g) * gate_up(r, f + j);
      });
}

void swiglu_backward(ConstMatrix gate_up, ConstMatrix dh, Matrix dgate_up) {
  check("swiglu_backward", gate_up, dh.extent(0), dh.extent(1));
  require_same_shape(gate_up, dgate_up, "swiglu_backward");
  const Index rows = static_cast<Index>(dh.extent(0)), f = static_cast<Index>(dh.extent(1));
  if constexpr (kHostKernels) {
    host_backward(gate_up.data(), dh.data(), dgate_up.data(), rows, f);
    return;
  }
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::swiglu::bwd"), Range(0, rows * f),
      KOKKOS_LAMBDA(const Index e) {
        const Index r = e / f, j = e % f;
        const float g = gate_up(r, j), u = gate_up(r, f + j), s = sigmoid(g);
        dgate_up(r, j) = dh(r, j) * u * s * (1.0f + g * (1.0f - s));
        dgate_up(r, f + j) = dh(r, j) * g * s;
      });
}

}  // namespace trellis::kernels
