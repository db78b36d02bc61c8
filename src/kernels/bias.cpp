#include "trellis/kernels/bias.hpp"

#include "epilogue_functions.hpp"
#include "trellis/core/host_simd.hpp"
#include "trellis/core/kernel_label.hpp"
#include "trellis/kernels/activation.hpp"

#include <algorithm>

namespace trellis::kernels {

namespace {

using Index = std::int64_t;

TRELLIS_HOST_CLONES
void host_bias_add(float* __restrict y, const float* __restrict bias, Index rows, Index cols) {
  for (Index r = 0; r < rows; ++r) {
    float* __restrict row = y + r * cols;
    for (Index j = 0; j < cols; ++j) row[j] += bias[j];
  }
}

// Columns summed per pass: an accumulator of this many floats stays in registers / L1 while
// the rows stream through.
constexpr Index kColumnTile = 256;

TRELLIS_HOST_CLONES
void host_column_sum(const float* __restrict dy, float* __restrict grad, Index rows, Index cols) {
  for (Index j0 = 0; j0 < cols; j0 += kColumnTile) {
    const Index width = std::min(kColumnTile, cols - j0);
    float sum[kColumnTile] = {};
    for (Index r = 0; r < rows; ++r) {
      const float* __restrict row = dy + r * cols + j0;
      for (Index j = 0; j < width; ++j) sum[j] += row[j];
    }
    for (Index j = 0; j < width; ++j) grad[j0 + j] += sum[j];
  }
}

using epilogue::activate;
using epilogue::activation_backward;

// Host bodies, inlined into one cloned function per activation (target_clones does not take
// templates); forced, since a body compiled out of line would get the baseline ISA only.
// In place: z is also y and only f(z + b) is stored.
#if defined(__GNUC__)
#define TRELLIS_INLINE_BODY __attribute__((always_inline)) inline
#else
#define TRELLIS_INLINE_BODY inline
#endif
template <Activation F>
TRELLIS_INLINE_BODY void bias_activation_in_place(float* __restrict y, const float* __restrict bias,
                                                  Index rows, Index cols) {
  for (Index r = 0; r < rows; ++r) {
    float* __restrict row = y + r * cols;
    for (Index j = 0; j < cols; ++j) row[j] = activate<F>(row[j] + bias[j]);
  }
}
template <Activation F>
TRELLIS_INLINE_BODY void bias_activation(float* __restrict z, const float* __restrict bias,
                                         float* __restrict y, Index rows, Index cols) {
  for (Index r = 0; r < rows; ++r) {
    float* __restrict zr = z + r * cols;
    float* __restrict yr = y + r * cols;
    for (Index j = 0; j < cols; ++j) {
      const float v = zr[j] + bias[j];
      zr[j] = v;
      yr[j] = activate<F>(v);
    }
  }
}
// Column tiles as host_column_sum: per column, the rows in order 0..n-1, then one add.
template <Activation F>
TRELLIS_INLINE_BODY void bias_activation_grad(const float* __restrict saved,
                                              const float* __restrict dy, float* __restrict dz,
                                              float* __restrict grad, Index rows, Index cols) {
  for (Index j0 = 0; j0 < cols; j0 += kColumnTile) {
    const Index width = std::min(kColumnTile, cols - j0);
    float sum[kColumnTile] = {};
    for (Index r = 0; r < rows; ++r) {
      // Two loops over the tile's piece of the row (the second reads dz back from L1): GCC
      // vectorises the GELU loop alone but not with the accumulation in the same body.
      float* __restrict dzr = dz + r * cols + j0;
      const float* __restrict sr = saved + r * cols + j0;
      const float* __restrict dyr = dy + r * cols + j0;
      for (Index j = 0; j < width; ++j) dzr[j] = activation_backward<F>(sr[j], dyr[j]);
      for (Index j = 0; j < width; ++j) sum[j] += dzr[j];
    }
    for (Index j = 0; j < width; ++j) grad[j0 + j] += sum[j];
  }
}

TRELLIS_HOST_CLONES
void host_bias_relu_in_place(float* y, const float* bias, Index rows, Index cols) {
  bias_activation_in_place<Activation::relu>(y, bias, rows, cols);
}
TRELLIS_HOST_CLONES
void host_bias_gelu_in_place(float* y, const float* bias, Index rows, Index cols) {
  bias_activation_in_place<Activation::gelu>(y, bias, rows, cols);
}
TRELLIS_HOST_CLONES
void host_bias_relu(float* z, const float* bias, float* y, Index rows, Index cols) {
  bias_activation<Activation::relu>(z, bias, y, rows, cols);
}
TRELLIS_HOST_CLONES
void host_bias_gelu(float* z, const float* bias, float* y, Index rows, Index cols) {
  bias_activation<Activation::gelu>(z, bias, y, rows, cols);
}
TRELLIS_HOST_CLONES
void host_relu_bias_grad(const float* saved, const float* dy, float* dz, float* grad, Index rows,
                         Index cols) {
  bias_activation_grad<Activation::relu>(saved, dy, dz, grad, rows, cols);
}
template <Activation F>
TRELLIS_INLINE_BODY void flat_bias_activation_grad(const float* __restrict saved,
                                                   const float* __restrict dy, float* __restrict dz,
                                                   float* grad, Index rows, Index cols) {
  // Measured (perf, GPT c_fc backward [2048, 512]): the GELU inside the column tiles ran at
  // half the speed of one flat GELU loop followed by the column sums, so GELU takes two passes
  // here (same values and summation order as the tiled body).
  const Index n = rows * cols;
  for (Index i = 0; i < n; ++i) dz[i] = activation_backward<F>(saved[i], dy[i]);
  host_column_sum(dz, grad, rows, cols);
}
TRELLIS_HOST_CLONES
void host_gelu_bias_grad(const float* saved, const float* dy, float* dz, float* grad, Index rows,
                         Index cols) {
  flat_bias_activation_grad<Activation::gelu>(saved, dy, dz, grad, rows, cols);
}
TRELLIS_HOST_CLONES
void host_gelu_tanh_in_place(float* y, const float* bias, Index rows, Index cols) {
  bias_activation_in_place<Activation::gelu_tanh>(y, bias, rows, cols);
}
TRELLIS_HOST_CLONES
void host_bias_gelu_tanh(float* z, const float* bias, float* y, Index rows, Index cols) {
  bias_activation<Activation::gelu_tanh>(z, bias, y, rows, cols);
}
TRELLIS_HOST_CLONES
void host_gelu_tanh_bias_grad(const float* saved, const float* dy, float* dz, float* grad,
                              Index rows, Index cols) {
  flat_bias_activation_grad<Activation::gelu_tanh>(saved, dy, dz, grad, rows, cols);
}

template <Activation F>
void device_bias_activation(float* zp, const float* bp, float* yp, Index rows, Index cols) {
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::linear::bias_act_fwd"), RowTeams(rows, Kokkos::AUTO),
      KOKKOS_LAMBDA(const RowTeams::member_type& team) {
        const Index at = static_cast<Index>(team.league_rank()) * cols;
        Kokkos::parallel_for(Kokkos::TeamVectorRange(team, cols), [&](const Index j) {
          const float v = zp[at + j] + bp[j];
          if (zp != yp) zp[at + j] = v;
          yp[at + j] = activate<F>(v);
        });
      });
}

// One thread per column walking down the rows (as column_sum_accumulate): coalesced reads of
// saved and dy and writes of dz, and the same summation order as the host.
template <Activation F>
void device_bias_activation_grad(const float* sp, const float* dyp, float* dzp, float* gp,
                                 Index rows, Index cols) {
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::linear::bias_act_bwd"), Range(0, cols),
      KOKKOS_LAMBDA(const Index j) {
        float sum = 0.0f;
        for (Index r = 0; r < rows; ++r) {
          const float d = activation_backward<F>(sp[r * cols + j], dyp[r * cols + j]);
          dzp[r * cols + j] = d;
          sum += d;
        }
        gp[j] += sum;
      });
}

}  // namespace

void bias_add(Matrix y, ConstVector bias) {
  TRELLIS_REQUIRE(bias.extent(0) == y.extent(1),
                  "bias_add: bias " + extents_string(bias) + " for rows " + extents_string(y));
  const Index rows = static_cast<Index>(y.extent(0)), cols = static_cast<Index>(y.extent(1));
  float* yp = y.data();
  const float* bp = bias.data();
  if constexpr (kHostKernels) {
    host_bias_add(yp, bp, rows, cols);
  } else {
    Kokkos::parallel_for(
        TRELLIS_KERNEL_LABEL("trellis::linear::bias_fwd"), RowTeams(rows, Kokkos::AUTO),
        KOKKOS_LAMBDA(const RowTeams::member_type& team) {
          float* row = yp + static_cast<Index>(team.league_rank()) * cols;
          Kokkos::parallel_for(Kokkos::TeamVectorRange(team, cols),
                               [&](const Index j) { row[j] += bp[j]; });
        });
  }
}

void column_sum_accumulate(ConstMatrix dy, Vector grad) {
  TRELLIS_REQUIRE(
      grad.extent(0) == dy.extent(1),
      "column_sum_accumulate: grad " + extents_string(grad) + " for rows " + extents_string(dy));
  const Index rows = static_cast<Index>(dy.extent(0)), cols = static_cast<Index>(dy.extent(1));
  const float* dyp = dy.data();
  float* gp = grad.data();
  if constexpr (kHostKernels) {
    host_column_sum(dyp, gp, rows, cols);
  } else {
    // One thread per column walking down the rows: a warp reads 32 consecutive floats of a row.
    Kokkos::parallel_for(
        TRELLIS_KERNEL_LABEL("trellis::linear::bias_bwd"), Range(0, cols),
        KOKKOS_LAMBDA(const Index j) {
          float sum = 0.0f;
          for (Index r = 0; r < rows; ++r) sum += dyp[r * cols + j];
          gp[j] += sum;
        });
  }
}

void bias_activation_forward(Matrix z, ConstVector bias, Activation f, Matrix y) {
  require_same_shape(z, y, "bias_activation_forward");
  TRELLIS_REQUIRE(
      bias.extent(0) == z.extent(1),
      "bias_activation_forward: bias " + extents_string(bias) + " for rows " + extents_string(z));
  const Index rows = static_cast<Index>(z.extent(0)), cols = static_cast<Index>(z.extent(1));
  float* zp = z.data();
  float* yp = y.data();
  const float* bp = bias.data();
  const bool in_place = zp == yp;
  switch (f) {
    case Activation::none:
      bias_add(z, bias);
      if (!in_place) Kokkos::deep_copy(y, z);
      return;
    case Activation::relu:
      if constexpr (kHostKernels) {
        in_place ? host_bias_relu_in_place(yp, bp, rows, cols)
                 : host_bias_relu(zp, bp, yp, rows, cols);
      } else {
        device_bias_activation<Activation::relu>(zp, bp, yp, rows, cols);
      }
      return;
    case Activation::gelu:
      if constexpr (kHostKernels) {
        in_place ? host_bias_gelu_in_place(yp, bp, rows, cols)
                 : host_bias_gelu(zp, bp, yp, rows, cols);
      } else {
        device_bias_activation<Activation::gelu>(zp, bp, yp, rows, cols);
      }
      return;
    case Activation::gelu_tanh:
      if constexpr (kHostKernels) {
        in_place ? host_gelu_tanh_in_place(yp, bp, rows, cols)
                 : host_bias_gelu_tanh(zp, bp, yp, rows, cols);
      } else {
        device_bias_activation<Activation::gelu_tanh>(zp, bp, yp, rows, cols);
      }
      return;
  }
}

void bias_activation_backward(ConstMatrix saved, ConstMatrix dy, Activation f, Matrix dz,
                              Vector grad) {
  require_same_shape(saved, dy, "bias_activation_backward");
  require_same_shape(saved, dz, "bias_activation_backward");
  TRELLIS_REQUIRE(
      grad.extent(0) == dy.extent(1),
      "bias_activation_backward: grad " + extents_string(grad) + " for rows " + extents_string(dy));
  TRELLIS_REQUIRE(f != Activation::none, "bias_activation_backward: no activation");
  const Index rows = static_cast<Index>(dy.extent(0)), cols = static_cast<Index>(dy.extent(1));
  const float* sp = saved.data();
  const float* dyp = dy.data();
  float* dzp = dz.data();
  float* gp = grad.data();
  switch (f) {
    case Activation::none:
      return;  // refused above
    case Activation::relu:
      if constexpr (kHostKernels) {
        host_relu_bias_grad(sp, dyp, dzp, gp, rows, cols);
      } else {
        device_bias_activation_grad<Activation::relu>(sp, dyp, dzp, gp, rows, cols);
      }
      return;
    case Activation::gelu:
      if constexpr (kHostKernels) {
        host_gelu_bias_grad(sp, dyp, dzp, gp, rows, cols);
      } else {
        device_bias_activation_grad<Activation::gelu>(sp, dyp, dzp, gp, rows, cols);
      }
      return;
    case Activation::gelu_tanh:
      if constexpr (kHostKernels) {
        host_gelu_tanh_bias_grad(sp, dyp, dzp, gp, rows, cols);
      } else {
        device_bias_activation_grad<Activation::gelu_tanh>(sp, dyp, dzp, gp, rows, cols);
      }
      return;
  }
}

}  // namespace trellis::kernels
