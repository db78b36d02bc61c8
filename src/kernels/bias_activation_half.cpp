#include "trellis/kernels/bias_activation_half.hpp"

#include "epilogue_functions.hpp"
#include "trellis/core/error.hpp"
#include "trellis/core/host_simd.hpp"
#include "trellis/core/kernel_label.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

namespace trellis::kernels {

namespace {

using Index = std::int64_t;
using epilogue::activate;
using epilogue::activation_backward;
using epilogue::half_bits;
using epilogue::widen;

// Host bodies, one per (activation, format), inlined into cloned wrappers below.
template <Activation F, Precision P>
TRELLIS_HOST_INLINE void forward_body(const float* __restrict z, const float* __restrict bias,
                                      std::uint16_t* __restrict z16, std::uint16_t* __restrict y16,
                                      Index rows, Index cols) {
  for (Index r = 0; r < rows; ++r) {
    const float* __restrict zr = z + r * cols;
    std::uint16_t* __restrict yr = y16 + r * cols;
    if constexpr (keeps_pre_activation(F)) {
      std::uint16_t* __restrict sr = z16 + r * cols;
      for (Index j = 0; j < cols; ++j) {
        const std::uint16_t s = half_bits<P>(zr[j] + bias[j]);
        sr[j] = s;
        yr[j] = half_bits<P>(activate<F>(widen<P>(s)));
      }
    } else {
      for (Index j = 0; j < cols; ++j)
        yr[j] = half_bits<P>(activate<F>(widen<P>(half_bits<P>(zr[j] + bias[j]))));
    }
  }
}
template <Activation F, Precision P>
TRELLIS_HOST_INLINE void recompute_body(const std::uint16_t* __restrict z16,
                                        std::uint16_t* __restrict y16, Index n) {
  for (Index i = 0; i < n; ++i) y16[i] = half_bits<P>(activate<F>(widen<P>(z16[i])));
}
// Column tiles of kTile as column_sum_accumulate: per column, the rows in order 0..n-1, then
// one add into grad, what it gives on the fp32 dz; dz of a tile's piece of a row goes through
// a stack buffer (no allocation per call).
constexpr Index kTile = 256;
template <Activation F, Precision P>
TRELLIS_HOST_INLINE void backward_body(const std::uint16_t* __restrict saved16,
                                       const float* __restrict dy, std::uint16_t* __restrict dz16,
                                       float* __restrict grad, Index rows, Index cols) {
  for (Index j0 = 0; j0 < cols; j0 += kTile) {
    const Index width = std::min(kTile, cols - j0);
    float sum[kTile] = {}, row[kTile];
    for (Index r = 0; r < rows; ++r) {
      const Index at = r * cols + j0;
      const float* __restrict dyr = dy + at;
      if constexpr (F == Activation::none) {
        for (Index j = 0; j < width; ++j) row[j] = dyr[j];
      } else {
        const std::uint16_t* __restrict sr = saved16 + at;
        for (Index j = 0; j < width; ++j) row[j] = activation_backward<F>(widen<P>(sr[j]), dyr[j]);
      }
      std::uint16_t* __restrict dzr = dz16 + at;
      for (Index j = 0; j < width; ++j) {
        sum[j] += row[j];
        dzr[j] = half_bits<P>(row[j]);
      }
    }
    for (Index j = 0; j < width; ++j) grad[j0 + j] += sum[j];
  }
}

using ForwardFn = void (*)(const float*, const float*, std::uint16_t*, std::uint16_t*, Index,
                           Index);
using RecomputeFn = void (*)(const std::uint16_t*, std::uint16_t*, Index);
using BackwardFn = void (*)(const std::uint16_t*, const float*, std::uint16_t*, float*, Index,
                            Index);
struct HostEpilogue {
  ForwardFn forward;
  RecomputeFn recompute;
  BackwardFn backward;
};

// target_clones takes no templates: one set of cloned wrappers per (activation, format).
#define TRELLIS_HALF_EPILOGUE(F, P, suffix)                                                      \
  TRELLIS_HOST_CLONES void host_forward_##suffix(const float* z, const float* b,                 \
                                                 std::uint16_t* z16, std::uint16_t* y16,         \
                                                 Index rows, Index cols) {                       \
    forward_body<F, P>(z, b, z16, y16, rows, cols);                                              \
  }                                                                                              \
  TRELLIS_HOST_CLONES void host_recompute_##suffix(const std::uint16_t* z16, std::uint16_t* y16, \
                                                   Index n) {                                    \
    recompute_body<F, P>(z16, y16, n);                                                           \
  }                                                                                              \
  TRELLIS_HOST_CLONES void host_backward_##suffix(const std::uint16_t* s, const float* dy,       \
                                                  std::uint16_t* dz16, float* grad, Index rows,  \
                                                  Index cols) {                                  \
    backward_body<F, P>(s, dy, dz16, grad, rows, cols);                                          \
  }                                                                                              \
  const HostEpilogue host_##suffix{host_forward_##suffix, host_recompute_##suffix,               \
                                   host_backward_##suffix};

TRELLIS_HALF_EPILOGUE(Activation::none, Precision::bf16, none_bf16)
TRELLIS_HALF_EPILOGUE(Activation::relu, Precision::bf16, relu_bf16)
TRELLIS_HALF_EPILOGUE(Activation::gelu, Precision::bf16, gelu_bf16)
TRELLIS_HALF_EPILOGUE(Activation::gelu_tanh, Precision::bf16, gelu_tanh_bf16)
TRELLIS_HALF_EPILOGUE(Activation::none, Precision::fp16, none_fp16)
TRELLIS_HALF_EPILOGUE(Activation::relu, Precision::fp16, relu_fp16)
TRELLIS_HALF_EPILOGUE(Activation::gelu, Precision::fp16, gelu_fp16)
TRELLIS_HALF_EPILOGUE(Activation::gelu_tanh, Precision::fp16, gelu_tanh_fp16)
#undef TRELLIS_HALF_EPILOGUE

const HostEpilogue& host_epilogue(Activation f, Precision p) {
  const bool bf16 = p == Precision::bf16;
  switch (f) {
    case Activation::relu:
      return bf16 ? host_relu_bf16 : host_relu_fp16;
    case Activation::gelu:
      return bf16 ? host_gelu_bf16 : host_gelu_fp16;
    case Activation::gelu_tanh:
      return bf16 ? host_gelu_tanh_bf16 : host_gelu_tanh_fp16;
    case Activation::none:
      break;
  }
  return bf16 ? host_none_bf16 : host_none_fp16;
}

// Device bodies: rows to teams, columns to vector lanes (forward); one thread per column
// walking down the rows (backward, as column_sum_accumulate: coalesced, same order).
template <Activation F>
void device_forward(Precision p, const float* zp, const float* bp, std::uint16_t* z16,
                    std::uint16_t* y16, Index rows, Index cols) {
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::linear::bias_act_fwd_half"), RowTeams(rows, Kokkos::AUTO),
      KOKKOS_LAMBDA(const RowTeams::member_type& team) {
        const Index at = static_cast<Index>(team.league_rank()) * cols;
        Kokkos::parallel_for(Kokkos::TeamVectorRange(team, cols), [&](const Index j) {
          const std::uint16_t s = to_half_bits(p, zp[at + j] + bp[j]);
          if (keeps_pre_activation(F)) z16[at + j] = s;
          y16[at + j] = to_half_bits(p, activate<F>(half_bits_to_float(p, s)));
        });
      });
}
template <Activation F>
void device_recompute(Precision p, const std::uint16_t* z16, std::uint16_t* y16, Index n) {
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::linear::act_recompute_half"), Range(0, n),
      KOKKOS_LAMBDA(const Index i) {
        y16[i] = to_half_bits(p, activate<F>(half_bits_to_float(p, z16[i])));
      });
}
template <Activation F>
void device_backward(Precision p, const std::uint16_t* sp, const float* dyp, std::uint16_t* dz16,
                     float* gp, Index rows, Index cols) {
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::linear::bias_act_bwd_half"), Range(0, cols),
      KOKKOS_LAMBDA(const Index j) {
        float sum = 0.0f;
        for (Index r = 0; r < rows; ++r) {
          const Index at = r * cols + j;
          const float d = F == Activation::none
                              ? dyp[at]
                              : activation_backward<F>(half_bits_to_float(p, sp[at]), dyp[at]);
          dz16[at] = to_half_bits(p, d);
          sum += d;
        }
        gp[j] += sum;
      });
}

// The device kernel of each activation, as a table indexed by it.
template <template <Activation> class Kernel>
struct ByActivation {
  template <class... Args>
  static void run(Activation f, Args... args) {
    switch (f) {
      case Activation::none:
        return Kernel<Activation::none>::run(args...);
      case Activation::relu:
        return Kernel<Activation::relu>::run(args...);
      case Activation::gelu:
        return Kernel<Activation::gelu>::run(args...);
      case Activation::gelu_tanh:
        return Kernel<Activation::gelu_tanh>::run(args...);
    }
  }
};
template <Activation F>
struct DeviceForward {
  template <class... Args>
  static void run(Args... args) {
    device_forward<F>(args...);
  }
};
template <Activation F>
struct DeviceRecompute {
  template <class... Args>
  static void run(Args... args) {
    device_recompute<F>(args...);
  }
};
template <Activation F>
struct DeviceBackward {
  template <class... Args>
  static void run(Args... args) {
    device_backward<F>(args...);
  }
};

void require_words(std::size_t words, std::size_t elements, const char* kernel, const char* what) {
  TRELLIS_REQUIRE(words == elements, std::string(kernel) + ": " + what + " has " +
                                         std::to_string(words) + " 16-bit words for " +
                                         std::to_string(elements) + " elements");
}
// v has one value per column of m (a bias, a bias gradient).
void require_per_column(const char* kernel, const char* what, const ConstVector& v,
                        const ConstMatrix& m) {
  TRELLIS_REQUIRE(v.extent(0) == m.extent(1), std::string(kernel) + ": " + what + " " +
                                                  extents_string(v) + " for rows " +
                                                  extents_string(m));
}
void require_format(Precision p, const char* kernel) {
  TRELLIS_REQUIRE(p != Precision::fp32,
                  std::string(kernel) + ": needs a 16-bit format (bf16 or fp16), got fp32");
}

}  // namespace

void bias_activation_forward_half(Precision p, ConstMatrix z, ConstVector bias, Activation f,
                                  HalfVector z16, HalfVector y16) {
  constexpr const char* kName = "bias_activation_forward_half";
  require_format(p, kName);
  require_per_column(kName, "bias", bias, z);
  const std::size_t elements = z.extent(0) * z.extent(1);
  require_words(y16.extent(0), elements, kName, "y16");
  if (keeps_pre_activation(f)) require_words(z16.extent(0), elements, kName, "z16");
  const Index rows = static_cast<Index>(z.extent(0)), cols = static_cast<Index>(z.extent(1));
  if constexpr (kHostKernels) {
    host_epilogue(f, p).forward(z.data(), bias.data(), z16.data(), y16.data(), rows, cols);
  } else {
    ByActivation<DeviceForward>::run(f, p, z.data(), bias.data(), z16.data(), y16.data(), rows,
                                     cols);
  }
}

void activation_forward_half(Precision p, ConstHalfVector z16, Activation f, HalfVector y16) {
  constexpr const char* kName = "activation_forward_half";
  require_format(p, kName);
  TRELLIS_REQUIRE(keeps_pre_activation(f),
                  std::string(kName) + ": only an activation that keeps its pre-activation");
  require_words(y16.extent(0), z16.extent(0), kName, "y16");
  const auto n = static_cast<Index>(z16.extent(0));
  if constexpr (kHostKernels) {
    host_epilogue(f, p).recompute(z16.data(), y16.data(), n);
  } else {
    ByActivation<DeviceRecompute>::run(f, p, z16.data(), y16.data(), n);
  }
}

void bias_activation_backward_half(Precision p, ConstHalfVector saved16, ConstMatrix dy,
                                   Activation f, HalfVector dz16, Vector grad) {
  constexpr const char* kName = "bias_activation_backward_half";
  require_format(p, kName);
  require_per_column(kName, "grad", grad, dy);
  const std::size_t elements = dy.extent(0) * dy.extent(1);
  require_words(dz16.extent(0), elements, kName, "dz16");
  if (f != Activation::none) require_words(saved16.extent(0), elements, kName, "saved16");
  const Index rows = static_cast<Index>(dy.extent(0)), cols = static_cast<Index>(dy.extent(1));
  if constexpr (kHostKernels) {
    host_epilogue(f, p).backward(saved16.data(), dy.data(), dz16.data(), grad.data(), rows, cols);
  } else {
    ByActivation<DeviceBackward>::run(f, p, saved16.data(), dy.data(), dz16.data(), grad.data(),
                                      rows, cols);
  }
}

}  // namespace trellis::kernels
