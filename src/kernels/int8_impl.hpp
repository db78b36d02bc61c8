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
#include <vector>

// oneDNN's int8 primitives work on host memory: CUDA builds take the reference kernels.
#if TRELLIS_HAVE_ONEDNN && !defined(TRELLIS_ENABLE_CUDA)
#define TRELLIS_INT8_ONEDNN 1
#include <dnnl.hpp>
#else
#define TRELLIS_INT8_ONEDNN 0
#endif

namespace trellis::kernels::int8_detail {

// f(z), as oneDNN's eltwise_relu, eltwise_gelu_erf and eltwise_gelu_tanh post-ops compute it.
KOKKOS_INLINE_FUNCTION float apply(Activation f, float z) {
  if (f == Activation::relu) return z > 0.0f ? z : 0.0f;
  if (f == Activation::gelu) return 0.5f * z * (1.0f + erff(z * 0.70710678118654752f));
  if (f == Activation::gelu_tanh)
    return 0.5f * z * (1.0f + tanhf(0.79788456080286536f * (z + 0.044715f * z * z * z)));
  return z;
}

#if TRELLIS_INT8_ONEDNN
inline dnnl::algorithm eltwise_algorithm(Activation f) {
  if (f == Activation::relu) return dnnl::algorithm::eltwise_relu;
  return f == Activation::gelu ? dnnl::algorithm::eltwise_gelu_erf
                               : dnnl::algorithm::eltwise_gelu_tanh;
}
#endif

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

#if TRELLIS_INT8_ONEDNN
// What a fused int8 primitive does after its sums, in this order: the dequantization as
// per-output-channel output scales (with the input's zero point), the bias as a binary post-op
// (the primitives' own bias would be added before the output scales in oneDNN 2.x int8, that
// is scaled with the sums), with `accumulate` the sum with what the destination holds, the
// activation, and with `residual` a binary add of a whole tensor of the destination's shape.
struct Epilogue {
  bool accumulate = false;
  Activation activation = Activation::none;
  const dnnl::memory::desc* residual = nullptr;
};

inline dnnl::primitive_attr fused_attributes(const std::vector<float>& scales, int zero_point,
                                             const dnnl::memory::desc& bias,
                                             const Epilogue& epilogue) {
  dnnl::primitive_attr attr;
  attr.set_output_scales(1 << 1, scales);
  if (zero_point != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {zero_point});
  dnnl::post_ops ops;
  ops.append_binary(dnnl::algorithm::binary_add, bias);
  if (epilogue.accumulate) ops.append_sum(1.0f);
  if (epilogue.activation != Activation::none)
    ops.append_eltwise(1.0f, eltwise_algorithm(epilogue.activation), 0.0f, 0.0f);
  if (epilogue.residual != nullptr)
    ops.append_binary(dnnl::algorithm::binary_add, *epilogue.residual);
  attr.set_post_ops(ops);
  return attr;
}
#endif

}  // namespace trellis::kernels::int8_detail
