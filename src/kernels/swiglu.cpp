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

// 16-bit storage: the same bodies on widened words, one clone set per format.
template <Precision P>
TRELLIS_HOST_INLINE float word(std::uint16_t h) {
  return P == Precision::bf16 ? bf16_bits_to_float(h) : fp16_bits_to_float(h);
}
template <Precision P>
TRELLIS_HOST_INLINE std::uint16_t bits(float v) {
  return P == Precision::bf16 ? float_to_bf16_bits(v) : float_to_fp16_bits(v);
}
template <Precision P>
TRELLIS_HOST_INLINE void forward_half_body(const std::uint16_t* __restrict gate_up,
                                           std::uint16_t* __restrict h, Index rows, Index f) {
  for (Index r = 0; r < rows; ++r) {
    const std::uint16_t* __restrict gate = gate_up + r * 2 * f;
    const std::uint16_t* __restrict up = gate + f;
    std::uint16_t* __restrict hr = h + r * f;
    for (Index j = 0; j < f; ++j) {
      const float g = word<P>(gate[j]);
      hr[j] = bits<P>(g * sigmoid(g) * word<P>(up[j]));
    }
  }
}
template <Precision P>
TRELLIS_HOST_INLINE void backward_half_body(const std::uint16_t* __restrict gate_up,
                                            const float* __restrict dh, float* __restrict dgate_up,
                                            Index rows, Index f) {
  for (Index r = 0; r < rows; ++r) {
    const std::uint16_t* __restrict gate = gate_up + r * 2 * f;
    const std::uint16_t* __restrict up = gate + f;
    const float* __restrict dhr = dh + r * f;
    float* __restrict dgate = dgate_up + r * 2 * f;
    float* __restrict dup = dgate + f;
    for (Index j = 0; j < f; ++j) {
      const float g = word<P>(gate[j]), u = word<P>(up[j]), s = sigmoid(g);
      dgate[j] = dhr[j] * u * s * (1.0f + g * (1.0f - s));
      dup[j] = dhr[j] * g * s;
    }
  }
}
TRELLIS_HOST_CLONES
void host_forward_bf16(const std::uint16_t* gate_up, std::uint16_t* h, Index rows, Index f) {
  forward_half_body<Precision::bf16>(gate_up, h, rows, f);
}
TRELLIS_HOST_CLONES
void host_forward_fp16(const std::uint16_t* gate_up, std::uint16_t* h, Index rows, Index f) {
  forward_half_body<Precision::fp16>(gate_up, h, rows, f);
}
TRELLIS_HOST_CLONES
void host_backward_bf16(const std::uint16_t* gate_up, const float* dh, float* dgate_up, Index rows,
                        Index f) {
  backward_half_body<Precision::bf16>(gate_up, dh, dgate_up, rows, f);
}
TRELLIS_HOST_CLONES
void host_backward_fp16(const std::uint16_t* gate_up, const float* dh, float* dgate_up, Index rows,
                        Index f) {
  backward_half_body<Precision::fp16>(gate_up, dh, dgate_up, rows, f);
}

// Row r's gate and up at column j of 16-bit gate_up [rows, 2f], widened (device bodies).
struct GateUp {
  float gate, up;
};
KOKKOS_INLINE_FUNCTION GateUp gate_up_at(Precision p, const std::uint16_t* gate_up, Index r,
                                         Index j, Index f) {
  return GateUp{half_bits_to_float(p, gate_up[r * 2 * f + j]),
                half_bits_to_float(p, gate_up[r * 2 * f + f + j])};
}

void check_half(const char* who, Precision p, std::size_t words, std::size_t rows, std::size_t f) {
  TRELLIS_REQUIRE(p != Precision::fp32,
                  std::string(who) + ": needs a 16-bit format (bf16 or fp16), got fp32");
  TRELLIS_REQUIRE(words == rows * 2 * f,
                  std::string(who) + ": gate_up16 has " + std::to_string(words) + " words for [" +
                      std::to_string(rows) + ", " + std::to_string(2 * f) + "]");
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

void swiglu_forward_half(Precision p, ConstHalfVector gate_up16, std::size_t rows, HalfVector h16) {
  const std::size_t f = rows > 0 ? h16.extent(0) / rows : 0;
  TRELLIS_REQUIRE(f * rows == h16.extent(0), "swiglu_forward_half: h16 has " +
                                                 std::to_string(h16.extent(0)) + " words for " +
                                                 std::to_string(rows) + " rows");
  check_half("swiglu_forward_half", p, gate_up16.extent(0), rows, f);
  const Index n = static_cast<Index>(rows), fi = static_cast<Index>(f);
  if constexpr (kHostKernels) {
    (p == Precision::bf16 ? host_forward_bf16 : host_forward_fp16)(gate_up16.data(), h16.data(), n,
                                                                   fi);
    return;
  }
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::swiglu::fwd_half"), Range(0, n * fi),
      KOKKOS_LAMBDA(const Index e) {
        const GateUp x = gate_up_at(p, gate_up16.data(), e / fi, e % fi, fi);
        h16(e) = to_half_bits(p, x.gate * sigmoid(x.gate) * x.up);
      });
}

void swiglu_backward_half(Precision p, ConstHalfVector gate_up16, ConstMatrix dh, Matrix dgate_up) {
  const std::size_t rows = dh.extent(0), f = dh.extent(1);
  check_half("swiglu_backward_half", p, gate_up16.extent(0), rows, f);
  TRELLIS_REQUIRE(dgate_up.extent(0) == rows && dgate_up.extent(1) == 2 * f,
                  "swiglu_backward_half: dgate_up " + extents_string(dgate_up) + " for dh " +
                      extents_string(dh));
  const Index n = static_cast<Index>(rows), fi = static_cast<Index>(f);
  if constexpr (kHostKernels) {
    (p == Precision::bf16 ? host_backward_bf16 : host_backward_fp16)(gate_up16.data(), dh.data(),
                                                                     dgate_up.data(), n, fi);
    return;
  }
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::swiglu::bwd_half"), Range(0, n * fi),
      KOKKOS_LAMBDA(const Index e) {
        const Index r = e / fi, j = e % fi;
        const GateUp x = gate_up_at(p, gate_up16.data(), r, j, fi);
        const float g = x.gate, u = x.up, s = sigmoid(g);
        dgate_up(r, j) = dh(r, j) * u * s * (1.0f + g * (1.0f - s));
        dgate_up(r, fi + j) = dh(r, j) * g * s;
      });
}

}  // namespace trellis::kernels
