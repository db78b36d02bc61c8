#include "trellis/kernels/attention/attention.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/fast_math.hpp"
#include "trellis/core/kernel_label.hpp"
#include "trellis/core/math.hpp"
#include "trellis/kernels/gemm.hpp"

#include <string>

namespace trellis::kernels {

namespace {

void check_heads(const char* who, std::size_t rows, std::size_t cols, int col0, int d, int n_head,
                 int seq_len, std::size_t heads_size) {
  const bool ok = d > 0 && n_head > 0 && seq_len > 0 && d % n_head == 0 && col0 >= 0 &&
                  static_cast<std::size_t>(col0 + d) <= cols &&
                  rows % static_cast<std::size_t>(seq_len) == 0 &&
                  heads_size == rows * static_cast<std::size_t>(d);
  if (!ok) {
    throw Error(std::string(who) + ": " + std::to_string(rows) + " x " + std::to_string(cols) +
                " rows, columns [" + std::to_string(col0) + ", " + std::to_string(col0 + d) +
                "), " + std::to_string(n_head) + " heads, seq_len " + std::to_string(seq_len) +
                ", heads buffer of " + std::to_string(heads_size) +
                " (need d % n_head == 0, rows % seq_len == 0, heads = rows * d)");
  }
}

}  // namespace

// Both rearrangements run one thread per (token row, head): a contiguous run of hd floats on
// each side, so the index arithmetic (divisions) is per run, not per element.

void split_heads(ConstMatrix rows, int col0, int d, int n_head, int seq_len, Vector heads) {
  check_heads("split_heads", rows.extent(0), rows.extent(1), col0, d, n_head, seq_len,
              heads.extent(0));
  const std::int64_t T = seq_len, H = n_head, hd = d / n_head, c0 = col0;
  const std::int64_t width = static_cast<std::int64_t>(rows.extent(1));
  const float* src = rows.data();
  float* dst = heads.data();
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::attn::split_heads"),
      Range(0, static_cast<std::int64_t>(rows.extent(0)) * H), KOKKOS_LAMBDA(const std::int64_t u) {
        const std::int64_t row = u / H, h = u % H;
        const std::int64_t b = row / T, t = row % T;
        const float* from = src + row * width + c0 + h * hd;
        float* to = dst + ((b * H + h) * T + t) * hd;
        for (std::int64_t i = 0; i < hd; ++i) to[i] = from[i];
      });
}

void merge_heads(ConstVector heads, int d, int n_head, int seq_len, Matrix rows, int col0) {
  check_heads("merge_heads", rows.extent(0), rows.extent(1), col0, d, n_head, seq_len,
              heads.extent(0));
  const std::int64_t T = seq_len, H = n_head, hd = d / n_head, c0 = col0;
  const std::int64_t width = static_cast<std::int64_t>(rows.extent(1));
  const float* src = heads.data();
  float* dst = rows.data();
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::attn::merge_heads"),
      Range(0, static_cast<std::int64_t>(rows.extent(0)) * H), KOKKOS_LAMBDA(const std::int64_t u) {
        const std::int64_t row = u / H, h = u % H;
        const std::int64_t b = row / T, t = row % T;
        const float* from = src + ((b * H + h) * T + t) * hd;
        float* to = dst + row * width + c0 + h * hd;
        for (std::int64_t i = 0; i < hd; ++i) to[i] = from[i];
      });
}

void gemm_batched(bool trans_a, bool trans_b, float alpha, ConstMatrix a, ConstMatrix b, float beta,
                  Matrix c, int batch) {
  const auto nb = static_cast<std::size_t>(batch);
  if (batch <= 0 || a.extent(0) % nb != 0 || b.extent(0) % nb != 0 || c.extent(0) % nb != 0) {
    throw Error("gemm_batched: stacks A " + extents_string(a) + ", B " + extents_string(b) +
                ", C " + extents_string(c) + " do not divide into " + std::to_string(batch) +
                " blocks");
  }
  const std::size_t ra = a.extent(0) / nb, rb = b.extent(0) / nb, rc = c.extent(0) / nb;
  const std::size_t ca = a.extent(1), cb = b.extent(1), cc = c.extent(1);
  for (std::size_t i = 0; i < nb; ++i) {
    gemm(trans_a, trans_b, alpha, ConstMatrix(a.data() + i * ra * ca, ra, ca),
         ConstMatrix(b.data() + i * rb * cb, rb, cb), beta, Matrix(c.data() + i * rc * cc, rc, cc));
  }
}

void causal_softmax_forward(Matrix s) {
  const std::int64_t T = static_cast<std::int64_t>(s.extent(1));
  TRELLIS_REQUIRE(
      T > 0 && s.extent(0) % s.extent(1) == 0,
      "causal_softmax_forward: scores " + extents_string(s) + " are no stack of square matrices");
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::attn::softmax_fwd"),
      Range(0, static_cast<std::int64_t>(s.extent(0))), KOKKOS_LAMBDA(const std::int64_t r) {
        const std::int64_t t = r % T;  // query position: keys 0..t are visible
        float m = s(r, 0);
        for (std::int64_t j = 1; j <= t; ++j) m = s(r, j) > m ? s(r, j) : m;
        float sum = 0.0f;
        for (std::int64_t j = 0; j <= t; ++j) {
          const float e = math::fast_exp(s(r, j) - m);
          s(r, j) = e;
          sum += e;
        }
        const float inv = 1.0f / sum;
        for (std::int64_t j = 0; j <= t; ++j) s(r, j) *= inv;
        for (std::int64_t j = t + 1; j < T; ++j) s(r, j) = 0.0f;
      });
}

void causal_dropout_apply(ConstMatrix in, Matrix out, const DropoutMask& mask) {
  require_same_shape(in, out, "causal_dropout_apply");
  TRELLIS_REQUIRE(mask.p >= 0.0f && mask.p < 1.0f,
                  "dropout probability must be in [0, 1), got " + std::to_string(mask.p));
  const std::int64_t T = static_cast<std::int64_t>(in.extent(1));
  TRELLIS_REQUIRE(
      T > 0 && in.extent(0) % in.extent(1) == 0,
      "causal_dropout_apply: " + extents_string(in) + " is no stack of square matrices");
  const float keep_scale = 1.0f / (1.0f - mask.p);
  const auto cols = static_cast<std::uint64_t>(T);
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::attn::dropout"),
      Range(0, static_cast<std::int64_t>(in.extent(0))), KOKKOS_LAMBDA(const std::int64_t r) {
        const std::int64_t t = r % T;
        const auto row = static_cast<std::uint64_t>(r);
        for (std::int64_t j = 0; j <= t; ++j) {
          out(r, j) = dropout_keep(mask, row, static_cast<std::uint64_t>(j), cols)
                          ? in(r, j) * keep_scale
                          : 0.0f;
        }
        for (std::int64_t j = t + 1; j < T; ++j) out(r, j) = 0.0f;
      });
}

void causal_softmax_backward(ConstMatrix p, Matrix ds) {
  require_same_shape(p, ds, "causal_softmax_backward");
  const std::int64_t T = static_cast<std::int64_t>(p.extent(1));
  TRELLIS_REQUIRE(T > 0 && p.extent(0) % p.extent(1) == 0,
                  "causal_softmax_backward: probabilities " + extents_string(p) +
                      " are no stack of square matrices");
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::attn::softmax_bwd"),
      Range(0, static_cast<std::int64_t>(p.extent(0))), KOKKOS_LAMBDA(const std::int64_t r) {
        const std::int64_t t = r % T;
        float dot = 0.0f;
        for (std::int64_t j = 0; j <= t; ++j) dot += p(r, j) * ds(r, j);
        for (std::int64_t j = 0; j <= t; ++j) ds(r, j) = p(r, j) * (ds(r, j) - dot);
        for (std::int64_t j = t + 1; j < T; ++j) ds(r, j) = 0.0f;
      });
}

}  // namespace trellis::kernels
