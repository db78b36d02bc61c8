// Autocast: how a model's GEMM layers (Linear, Conv2d, the GPT's tied head) run in mixed
// precision (precision.mode = bf16 | fp16), after PyTorch's autocast op lists:
//
//   in 16 bits     the GEMM/convolution operands: weights (a rounded copy of the fp32 master
//                  weights, ParameterStore::compute_*), input activations, output gradients;
//                  and the layer's outputs and input gradients
//   in fp32        accumulation inside every GEMM; weight gradients (accumulated straight into
//                  the fp32 gradient buffer, as Megatron's fused wgrad does); master weights,
//                  optimizer state, biases, softmax, LayerNorm / BatchNorm statistics, the
//                  loss, attention's softmax and its score/value products
//
// Kernels: `emulated` keeps operands in fp32 buffers holding exactly the 16-bit values and
// runs the fp32 GEMM: the same numbers as 16-bit storage with fp32 accumulation (up to the
// summation order), on any host. It is the path on hosts without fast 16-bit matrix units:
// on a CPU with AVX512-BF16 but no AMX, oneDNN's bf16 matmul and the VDPBF16PS peak are half
// the fp32 FMA peak (measured: tools/bench/NOTES.md), so 16-bit arithmetic would be slower.
// `native` (16-bit storage, oneDNN / cuBLAS GemmEx) is not built yet: asking for it is a
// ConfigError, and auto resolves to emulated with a notice saying why.
#pragma once

#include "trellis/core/kokkos_types.hpp"
#include "trellis/core/precision.hpp"

#include <string>

namespace trellis::nn {

struct Autocast {
  Precision mode = Precision::fp32;
  bool native = false;  // 16-bit storage and kernels; false: emulated (see above)

  bool active() const { return mode != Precision::fp32; }
};

// precision.mode + precision.kernels (auto | native | emulated) for this build and host.
// `notice`: one line for the set-up log saying which kernels run and why (empty for fp32).
// ConfigError naming precision.kernels when the choice cannot run here.
Autocast resolve_autocast(Precision mode, const std::string& kernels, std::string& notice);

// A layer's rounded copy of one GEMM operand, [capacity_elements] floats, allocated only when
// autocast is active (no memory otherwise).
class AutocastOperand {
 public:
  AutocastOperand() = default;
  AutocastOperand(const Autocast& autocast, const std::string& label,
                  std::size_t capacity_elements);

  // m rounded into this buffer (the returned window has m's shape), or m itself when off.
  ConstMatrix round(const ConstMatrix& m);
  // The window the last round() returned.
  ConstMatrix last() const { return last_; }

 private:
  Precision mode_ = Precision::fp32;
  FloatView buffer_;
  ConstMatrix last_;
};

// m := m rounded to the autocast's format (a layer's own output or input gradient); nothing
// when off.
void round_in_place(const Autocast& autocast, const Matrix& m);

}  // namespace trellis::nn
