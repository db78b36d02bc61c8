// Int8 inference kernels (trellis quantize, eval and generate of an int8 model):
//
//   activations, per tensor:   q = clamp(round(x / s) + z, qmin, qmax)
//                              u8: z in [0, 255], [0, 255];  s8: z = 0, [-128, 127] (the
//                              saturation of oneDNN's reorders; weights keep [-127, 127])
//   weights, per output row:   q[o, k] = clamp(round(w[o, k] / s_w[o]), -127, 127),
//                              s_w[o] = max_k |w[o, k]| / 127 (1 for an all-zero row)
//   linear:                    y[i, o] = f(s * s_w[o] * sum_k (q_x[i, k] - z) q_w[o, k] + b[o])
//                              sums in s32; f = none | relu | gelu | gelu_tanh; y fp32, or with a
//                              residual r: y = f(...) + r
// Rounding is to nearest, ties to even (as PyTorch's quantize_per_tensor and oneDNN).
//
// Int8Linear runs the linear on oneDNN's int8 matmul where the build has it (u8 x s8 or
// s8 x s8 -> s32 on VNNI/AMX-INT8 tiles; the dequantization s * s_w[o], the bias and f fused
// into the primitive as output scales, bias and an eltwise post-op, so the s32 sums never
// reach memory), and on a portable Kokkos kernel otherwise (CUDA builds: no cuBLASLt int8
// yet): the reference the tests hold oneDNN to.
#pragma once

#include "trellis/kernels/bias.hpp"
#include "trellis/kernels/views.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace trellis::kernels {

using Int8View = Kokkos::View<std::int8_t*, MemSpace>;
using ConstInt8Vector = Kokkos::View<const std::int8_t*, MemSpace, Unmanaged>;
// Quantized activations: u8 values, or s8 values stored in the same bytes.
using ByteView = Kokkos::View<std::uint8_t*, MemSpace>;
using ConstByteVector = Kokkos::View<const std::uint8_t*, MemSpace, Unmanaged>;
using ByteVector = Kokkos::View<std::uint8_t*, MemSpace, Unmanaged>;

enum class QuantType { u8, s8 };
const char* quant_type_name(QuantType type);  // "u8" | "s8"

struct ActivationQuant {
  QuantType type = QuantType::u8;
  float scale = 1.0f;
  int zero_point = 0;  // u8 only (s8 is symmetric)
  KOKKOS_INLINE_FUNCTION int qmin() const { return type == QuantType::u8 ? 0 : -128; }
  KOKKOS_INLINE_FUNCTION int qmax() const { return type == QuantType::u8 ? 255 : 127; }
};

// out[e] = q(x[e]) for e < n: x [n] fp32, out [>= n] bytes (s8 values as their bit patterns).
void quantize(ConstVector x, const ActivationQuant& q, ByteView out);
// out[e] = q(f(z[e])) for e < n: a transformer MLP's hidden activation quantized for its
// second Linear in one pass (f: none, gelu or gelu_tanh as kernels/activation.hpp computes
// them; rounding as quantize).
void activation_quantize(ConstVector z, Activation f, const ActivationQuant& q, ByteVector out);
// x[e] = s (q[e] - z): the inverse, for tests and error bounds.
void dequantize(ConstByteVector q, const ActivationQuant& quant, Vector x);

// Symmetric per-row weights (see above): w [rows * cols] row-major -> q [rows * cols],
// scales [rows].
void quantize_weights(ConstVector w, std::size_t rows, std::size_t cols, Int8View q, Vector scales);

enum class Int8Backend { automatic, onednn, reference };
// Whether this build has oneDNN's int8 matmul on this CPU (asked of oneDNN once) and the CPU
// has int8 dot products (VNNI or AMX), without which oneDNN's sums saturate.
bool int8_onednn_available();

// One layer's int8 linear y = f(x W^T + b), quantized as above. Weights, scales and bias are
// copied in at construction; forward() takes the quantized input.
class Int8Linear {
 public:
  // weights [out * in] s8, weight_scales [out], bias [out] (fp32). automatic: oneDNN where
  // available, else the reference kernel; onednn where it is not: Error.
  Int8Linear(const std::string& name, int in, int out, ConstInt8Vector weights,
             ConstVector weight_scales, ConstVector bias, const ActivationQuant& input,
             Activation f, Int8Backend backend = Int8Backend::automatic);
  ~Int8Linear();
  Int8Linear(const Int8Linear&) = delete;
  Int8Linear& operator=(const Int8Linear&) = delete;

  // Before the first forward: with a residual, y = f(x W^T + b) + r, r [n, out] fp32 given to
  // forward (a transformer's residual stream, added in the epilogue instead of a pass of its
  // own).
  void set_residual(bool residual);
  // The epilogue's activation (the constructor's by default), before the first forward.
  void set_activation(Activation f);

  // xq [>= n * in] quantized with input(); y [n, out]; residual [n, out] exactly when
  // set_residual(true).
  void forward(ConstByteVector xq, int n, Matrix y, ConstMatrix residual = {});
  const ActivationQuant& input() const { return input_; }
  bool uses_onednn() const { return onednn_ != nullptr; }
  int in_features() const { return in_; }
  int out_features() const { return out_; }
  // The portable kernel forward() runs without oneDNN. Public only because nvcc refuses an
  // extended (KOKKOS_LAMBDA) lambda in a private member function; call forward().
  void forward_reference(ConstByteVector xq, int n, Matrix y, ConstMatrix residual) const;

 private:
  void require_unplanned(const char* what) const;

  std::string name_;
  int in_, out_;
  Int8View weights_;  // [out * in]
  FloatView scales_;  // [out]: s * s_w[o], the dequantization of each output column
  FloatView bias_;    // [out]
  ActivationQuant input_;
  Activation activation_;
  bool residual_ = false;
  bool ran_ = false;  // a forward with rows ran: the epilogue is fixed from then on
  struct Onednn;      // primitives per batch size (int8.cpp)
  std::unique_ptr<Onednn> onednn_;
};

}  // namespace trellis::kernels
