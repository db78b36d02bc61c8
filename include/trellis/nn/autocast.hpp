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
// `native` keeps the operands in 16-bit buffers (half the memory of the saved operands) and
// runs kernels/gemm_half.hpp (oneDNN bf16 matmul on the host, cuBLAS GemmEx on CUDA) and, on
// hosts whose oneDNN has a bf16 convolution, bf16 convolutions (nn/conv2d.hpp). auto picks it
// on CUDA builds, and on hosts where a probe (kernels/bf16_speed_probe.hpp) measures oneDNN's
// bf16 GEMM at least 1.2x its fp32 one: AMX, or AVX512-BF16 at full rate (AMD Zen 4); not on
// an Intel CPU without AMX, where it measured half.
#pragma once

#include "trellis/core/kokkos_types.hpp"
#include "trellis/core/precision.hpp"
#include "trellis/kernels/gemm_half.hpp"
#include "trellis/kernels/precision_cast.hpp"
#include "trellis/nn/buffer_pool.hpp"

#include <functional>
#include <string>

namespace trellis::nn {

struct Autocast {
  Precision mode = Precision::fp32;
  bool native = false;  // 16-bit storage and kernels; false: emulated (see above)

  bool active() const { return mode != Precision::fp32; }
};

// The smallest of a value over every rank (collective), so that all ranks take the same
// choice from a timing each measures alone; empty: this process alone.
using AgreeOnMinimum = std::function<double(double)>;

// precision.mode + precision.kernels (auto | native | emulated) for this build and host.
// `notice`: one line for the set-up log saying which kernels run and why (empty for fp32).
// ConfigError naming precision.kernels when the choice cannot run here. With bf16 and auto on
// a host build, `agree` is called once on every rank (whatever its CPU).
Autocast resolve_autocast(Precision mode, const std::string& kernels, std::string& notice,
                          const AgreeOnMinimum& agree = {});

// A layer's rounded copy of one GEMM operand, [capacity_elements] values, allocated only when
// autocast is active (no memory otherwise): 16-bit words with native kernels (unless the
// layer asks for fp32 storage: emulated_only), fp32 holding the rounded values otherwise.
class AutocastOperand {
 public:
  AutocastOperand() = default;
  // role: whether backward reads the rounded copy (nn/buffer_pool.hpp).
  AutocastOperand(const Autocast& autocast, const std::string& label, std::size_t capacity_elements,
                  BufferRole role, bool emulated_only = false);

  // m rounded into this buffer (same shape), or m itself when off.
  kernels::GemmOperand round(const ConstMatrix& m);
  // The same for an emulated_only operand, as a matrix (Error for a 16-bit buffer).
  ConstMatrix round_matrix(const ConstMatrix& m);
  // A kernel that rounds into the 16-bit buffer itself (kernels/bias_activation_half.hpp)
  // writes the first rows * cols words of half_words(), then written() makes them last().
  // Native storage only (Error otherwise).
  kernels::HalfVector half_words(std::size_t count) const;
  const kernels::GemmOperand& written(std::size_t rows, std::size_t cols);
  // What the last round() / round_matrix() / written() returned.
  const kernels::GemmOperand& last() const { return last_; }
  ConstMatrix last_matrix() const;

 private:
  Precision mode_ = Precision::fp32;
  FloatView buffer_;        // emulated
  kernels::HalfView half_;  // native
  kernels::GemmOperand last_;
};

// m := m rounded to the autocast's format (a layer's own output or input gradient); nothing
// when off.
void round_in_place(const Autocast& autocast, const Matrix& m);

}  // namespace trellis::nn
