#include "batchnorm_blocked.hpp"

#include "trellis/core/host_simd.hpp"

namespace trellis::kernels::detail {

namespace {

using Index = std::int64_t;

// GCC's generic vectors: four doubles (one AVX2 register, two SSE ones in the baseline clone)
// and the four floats they are widened from. Written out because GCC does not vectorise the
// per-lane double accumulators of a plain loop (measured: scalar code, accumulators on the
// stack, slower than the NCHW kernel).
typedef float Floats4 __attribute__((vector_size(16)));
typedef double Doubles4 __attribute__((vector_size(32)));

// Through a reference: a vector returned by value would change the baseline clone's ABI.
TRELLIS_HOST_INLINE void widen(const float* __restrict p, Doubles4& out) {
  Floats4 f;
  __builtin_memcpy(&f, p, sizeof f);
  out = __builtin_convertvector(f, Doubles4);
}

// The same for dy where a fused ReLU's output says which elements passed: dy * [mask > 0].
TRELLIS_HOST_INLINE void widen_masked(const float* __restrict p, const float* __restrict mask,
                                      Doubles4& out) {
  Floats4 f, m;
  __builtin_memcpy(&f, p, sizeof f);
  __builtin_memcpy(&m, mask, sizeof m);
  const Floats4 zero = {};
  f = m > zero ? f : zero;
  out = __builtin_convertvector(f, Doubles4);
}

// Per lane l of channel block cb: sum over (i, p) of first(x) and of second(x), in two
// interleaved partial sums over the pixels (even, odd) so consecutive pixels do not wait on
// one another's additions, added at the end. A fixed order: reproducible.
//   moments(e, g, v, first, second): from the 4 doubles v at element e (lane group g), adds
//   the terms to first and second.
template <int B, class Moments>
TRELLIS_HOST_INLINE void block_moments(const BlockedShape& s, Index cb, Moments moments,
                                       double* __restrict out, Index channels) {
  constexpr int G = B / 4;
  Doubles4 a0[G] = {}, a1[G] = {}, b0[G] = {}, b1[G] = {};
  for (Index i = 0; i < s.n; ++i) {
    const Index base = (i * s.blocks + cb) * s.plane * B;
    Index p = 0;
    for (; p + 2 <= s.plane; p += 2) {
      for (int g = 0; g < G; ++g) {
        moments(base + p * B + 4 * g, g, a0[g], b0[g]);
        moments(base + (p + 1) * B + 4 * g, g, a1[g], b1[g]);
      }
    }
    if (p < s.plane) {
      for (int g = 0; g < G; ++g) moments(base + p * B + 4 * g, g, a0[g], b0[g]);
    }
  }
  for (int g = 0; g < G; ++g) {
    const Doubles4 first = a0[g] + a1[g], second = b0[g] + b1[g];
    for (int l = 0; l < 4; ++l) {
      out[cb * B + 4 * g + l] = first[l];
      out[channels + cb * B + 4 * g + l] = second[l];
    }
  }
}

template <int B>
TRELLIS_HOST_INLINE void sums_body(const float* __restrict x, double* __restrict sums,
                                   const BlockedShape& s) {
  const Index channels = s.blocks * B;
  for (Index cb = 0; cb < s.blocks; ++cb) {
    block_moments<B>(
        s, cb,
        [x](Index e, int, Doubles4& first, Doubles4& second) {
          Doubles4 v;
          widen(x + e, v);
          first += v;
          second += v * v;
        },
        sums, channels);
  }
}

template <int B, bool Masked>
TRELLIS_HOST_INLINE void backward_sums_body(const float* __restrict x, const float* __restrict dy,
                                            const float* __restrict relu_output,
                                            const double* __restrict stats, double* __restrict sums,
                                            const BlockedShape& s) {
  constexpr int G = B / 4;
  const Index channels = s.blocks * B;
  for (Index cb = 0; cb < s.blocks; ++cb) {
    Doubles4 mean[G], invstd[G];
    for (int g = 0; g < G; ++g) {
      for (int l = 0; l < 4; ++l) {
        mean[g][l] = stats[cb * B + 4 * g + l];
        invstd[g][l] = stats[channels + cb * B + 4 * g + l];
      }
    }
    block_moments<B>(
        s, cb,
        [&](Index e, int g, Doubles4& first, Doubles4& second) {
          Doubles4 d, v;
          if constexpr (Masked)
            widen_masked(dy + e, relu_output + e, d);
          else
            widen(dy + e, d);
          widen(x + e, v);
          first += d;
          second += d * (v - mean[g]) * invstd[g];  // as the NCHW kernel
        },
        sums, channels);
  }
}

template <int B, bool Relu>
TRELLIS_HOST_INLINE void normalize_body(const float* __restrict x, const double* __restrict stats,
                                        const float* __restrict gamma, const float* __restrict beta,
                                        float* __restrict y, const BlockedShape& s) {
  const Index channels = s.blocks * B;
  for (Index i = 0; i < s.n; ++i) {
    for (Index cb = 0; cb < s.blocks; ++cb) {
      float mean[B], scale[B], shift[B];
      for (int l = 0; l < B; ++l) {
        const Index c = cb * B + l;
        mean[l] = static_cast<float>(stats[c]);
        scale[l] = static_cast<float>(stats[channels + c] * gamma[c]);
        shift[l] = beta[c];
      }
      const Index base = (i * s.blocks + cb) * s.plane * B;
      const float* __restrict src = x + base;
      float* __restrict dst = y + base;
      for (Index p = 0; p < s.plane; ++p) {
        for (int l = 0; l < B; ++l) {
          const float v = (src[p * B + l] - mean[l]) * scale[l] + shift[l];
          dst[p * B + l] = Relu ? (v > 0.0f ? v : 0.0f) : v;
        }
      }
    }
  }
}

template <int B, bool Masked>
TRELLIS_HOST_INLINE void backward_input_body(
    const float* __restrict x, const float* __restrict dy, const float* __restrict relu_output,
    const double* __restrict stats, const float* __restrict gamma, const double* __restrict sums,
    double inv_count, bool training, float* __restrict dx, const BlockedShape& s) {
  const Index channels = s.blocks * B;
  for (Index i = 0; i < s.n; ++i) {
    for (Index cb = 0; cb < s.blocks; ++cb) {
      float a[B], b[B], d[B], mean[B];
      for (int l = 0; l < B; ++l) {
        const InputGradCoefficients k =
            input_grad_coefficients(stats, gamma, sums, inv_count, training, cb * B + l, channels);
        a[l] = k.a, b[l] = k.b, d[l] = k.d, mean[l] = k.mean;
      }
      const Index base = (i * s.blocks + cb) * s.plane * B;
      const float* __restrict xs = x + base;
      const float* __restrict ds = dy + base;
      const float* __restrict ms = Masked ? relu_output + base : nullptr;
      float* __restrict out = dx + base;
      for (Index p = 0; p < s.plane; ++p) {
        for (int l = 0; l < B; ++l) {
          const Index e = p * B + l;
          const float g = Masked ? (ms[e] > 0.0f ? ds[e] : 0.0f) : ds[e];
          out[e] = a[l] * g + b[l] * (xs[e] - mean[l]) + d[l];
        }
      }
    }
  }
}

// One clone set per block size: the bodies are inlined into each clone, so each gets the
// clone's instruction set.
TRELLIS_HOST_CLONES void sums_8(const float* x, double* sums, const BlockedShape& s) {
  sums_body<8>(x, sums, s);
}
TRELLIS_HOST_CLONES void sums_16(const float* x, double* sums, const BlockedShape& s) {
  sums_body<16>(x, sums, s);
}
// A null relu_output (no fused ReLU) and a given one take separate inlined bodies.
TRELLIS_HOST_CLONES void backward_sums_8(const float* x, const float* dy, const float* relu_output,
                                         const double* stats, double* sums, const BlockedShape& s) {
  if (relu_output == nullptr)
    backward_sums_body<8, false>(x, dy, relu_output, stats, sums, s);
  else
    backward_sums_body<8, true>(x, dy, relu_output, stats, sums, s);
}
TRELLIS_HOST_CLONES void backward_sums_16(const float* x, const float* dy, const float* relu_output,
                                          const double* stats, double* sums,
                                          const BlockedShape& s) {
  if (relu_output == nullptr)
    backward_sums_body<16, false>(x, dy, relu_output, stats, sums, s);
  else
    backward_sums_body<16, true>(x, dy, relu_output, stats, sums, s);
}
TRELLIS_HOST_CLONES void normalize_8(const float* x, const double* stats, const float* gamma,
                                     const float* beta, bool relu, float* y,
                                     const BlockedShape& s) {
  if (relu)
    normalize_body<8, true>(x, stats, gamma, beta, y, s);
  else
    normalize_body<8, false>(x, stats, gamma, beta, y, s);
}
TRELLIS_HOST_CLONES void normalize_16(const float* x, const double* stats, const float* gamma,
                                      const float* beta, bool relu, float* y,
                                      const BlockedShape& s) {
  if (relu)
    normalize_body<16, true>(x, stats, gamma, beta, y, s);
  else
    normalize_body<16, false>(x, stats, gamma, beta, y, s);
}
TRELLIS_HOST_CLONES void backward_input_8(const float* x, const float* dy, const float* relu_output,
                                          const double* stats, const float* gamma,
                                          const double* sums, double inv_count, bool training,
                                          float* dx, const BlockedShape& s) {
  if (relu_output == nullptr)
    backward_input_body<8, false>(x, dy, relu_output, stats, gamma, sums, inv_count, training, dx,
                                  s);
  else
    backward_input_body<8, true>(x, dy, relu_output, stats, gamma, sums, inv_count, training, dx,
                                 s);
}
TRELLIS_HOST_CLONES void backward_input_16(const float* x, const float* dy,
                                           const float* relu_output, const double* stats,
                                           const float* gamma, const double* sums, double inv_count,
                                           bool training, float* dx, const BlockedShape& s) {
  if (relu_output == nullptr)
    backward_input_body<16, false>(x, dy, relu_output, stats, gamma, sums, inv_count, training, dx,
                                   s);
  else
    backward_input_body<16, true>(x, dy, relu_output, stats, gamma, sums, inv_count, training, dx,
                                  s);
}

}  // namespace

bool blocked_sums(const float* x, double* sums, const BlockedShape& s) {
  if (s.block == 8) return sums_8(x, sums, s), true;
  if (s.block == 16) return sums_16(x, sums, s), true;
  return false;
}

bool blocked_backward_sums(const float* x, const float* dy, const float* relu_output,
                           const double* stats, double* sums, const BlockedShape& s) {
  if (s.block == 8) return backward_sums_8(x, dy, relu_output, stats, sums, s), true;
  if (s.block == 16) return backward_sums_16(x, dy, relu_output, stats, sums, s), true;
  return false;
}

bool blocked_normalize(const float* x, const double* stats, const float* gamma, const float* beta,
                       bool relu, float* y, const BlockedShape& s) {
  if (s.block == 8) return normalize_8(x, stats, gamma, beta, relu, y, s), true;
  if (s.block == 16) return normalize_16(x, stats, gamma, beta, relu, y, s), true;
  return false;
}

bool blocked_backward_input(const float* x, const float* dy, const float* relu_output,
                            const double* stats, const float* gamma, const double* sums,
                            double inv_count, bool training, float* dx, const BlockedShape& s) {
  if (s.block == 8) {
    return backward_input_8(x, dy, relu_output, stats, gamma, sums, inv_count, training, dx, s),
           true;
  }
  if (s.block == 16) {
    return backward_input_16(x, dy, relu_output, stats, gamma, sums, inv_count, training, dx, s),
           true;
  }
  return false;
}

}  // namespace trellis::kernels::detail
