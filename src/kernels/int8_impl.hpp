// What the int8 kernels (int8.cpp, int8_conv.cpp) share: whether oneDNN runs them, and the
// activations of their fused epilogue in the reference kernels.
#pragma once

#include "trellis/core/error.hpp"
#include "trellis/core/kernel_label.hpp"
#include "trellis/kernels/bias.hpp"
#include "trellis/kernels/int8.hpp"

#include <Kokkos_Core.hpp>

#include <cmath>
#include <string>

// oneDNN's int8 primitives work on host memory: CUDA builds take the reference kernels.
#if TRELLIS_HAVE_ONEDNN && !defined(TRELLIS_ENABLE_CUDA)
#define TRELLIS_INT8_ONEDNN 1
#include <dnnl.hpp>
#else
#define TRELLIS_INT8_ONEDNN 0
#endif

namespace trellis::kernels::int8_detail {

// f(z), as oneDNN's eltwise_relu and eltwise_gelu_erf post-ops compute it.
KOKKOS_INLINE_FUNCTION float apply(Activation f, float z) {
  if (f == Activation::relu) return z > 0.0f ? z : 0.0f;
  if (f == Activation::gelu) return 0.5f * z * (1.0f + erff(z * 0.70710678118654752f));
  return z;
}

// scales[o] = input_scale * weight_scales[o]: each output's dequantization factor.
inline void output_scales(float input_scale, ConstVector weight_scales, const FloatView& scales) {
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::int8::output_scales"),
      Range(0, static_cast<std::int64_t>(scales.extent(0))),
      KOKKOS_LAMBDA(const std::int64_t o) { scales(o) = input_scale * weight_scales(o); });
}

// Whether a kernel asked for `backend` runs oneDNN; Error naming `what` when oneDNN was
// asked for and this build or CPU has none.
inline bool use_onednn(Int8Backend backend, const std::string& what) {
  if (backend == Int8Backend::onednn && !int8_onednn_available())
    throw Error(what + ": this build has no oneDNN int8 kernels on this CPU");
  return backend != Int8Backend::reference && int8_onednn_available();
}

}  // namespace trellis::kernels::int8_detail
