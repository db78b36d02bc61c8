#include "trellis/kernels/attention/rope.hpp"

#include "trellis/core/code_path.hpp"
#include "trellis/core/kernel_label.hpp"

#include <cmath>
#include <string>

namespace trellis::kernels {

namespace {

constexpr double kPi = 3.14159265358979323846;

// HF's _compute_llama3_parameters, on one frequency.
double llama3_scaled(const RopeSpec& s, double inv_freq) {
  const double low_wavelen = s.original_context / s.low_freq_factor;
  const double high_wavelen = s.original_context / s.high_freq_factor;
  const double wavelen = 2.0 * kPi / inv_freq;
  if (wavelen < high_wavelen) return inv_freq;
  if (wavelen > low_wavelen) return inv_freq / s.factor;
  const double smooth =
      (s.original_context / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  return (1.0 - smooth) * inv_freq / s.factor + smooth * inv_freq;
}

void check_call(const char* who, const Matrix& qkv, const QkvLayout& layout, int seq_len,
                int first_position, const ConstVector& cos, const ConstVector& sin) {
  const std::int64_t half = layout.head_dim / 2;
  const bool shape_ok = layout.n_head > 0 && layout.n_kv_head > 0 && layout.head_dim > 0 &&
                        layout.head_dim % 2 == 0 && layout.n_head % layout.n_kv_head == 0 &&
                        static_cast<std::int64_t>(qkv.extent(1)) == layout.width() && seq_len > 0 &&
                        qkv.extent(0) % static_cast<std::size_t>(seq_len) == 0 &&
                        first_position >= 0;
  const std::size_t need = (static_cast<std::size_t>(first_position) + seq_len) * half;
  TRELLIS_REQUIRE(
      shape_ok && cos.extent(0) >= need && sin.extent(0) >= need,
      std::string(who) + ": qkv " + extents_string(qkv) + ", " + std::to_string(layout.n_head) +
          " heads, " + std::to_string(layout.n_kv_head) + " kv heads of " +
          std::to_string(layout.head_dim) + ", seq_len " + std::to_string(seq_len) +
          ", first position " + std::to_string(first_position) + ", tables " + extents_string(cos) +
          " (need qkv [n, (heads + 2 kv heads) * head_dim], "
          "an even head_dim, n % seq_len == 0, tables of (first position + "
          "seq_len) * head_dim / 2)");
}

// sign +1: forward rotation; -1: its transpose (backward).
void rotate(Matrix x, const QkvLayout& layout, int seq_len, int first_position, ConstVector cos,
            ConstVector sin, float sign) {
  const std::int64_t rows = static_cast<std::int64_t>(x.extent(0));
  const std::int64_t hd = layout.head_dim, half = hd / 2;
  const std::int64_t slots = layout.n_head + 2 * layout.n_kv_head;
  const std::int64_t T = seq_len, p0 = first_position;
  if constexpr (kHostKernels) {
    float* data = x.data();
    const float* c = cos.data();
    const float* s = sin.data();
    const std::int64_t width = layout.width();
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* __restrict cr = c + (p0 + r % T) * half;
      const float* __restrict sr = s + (p0 + r % T) * half;
      for (std::int64_t slot = 0; slot < slots; ++slot) {
        if (!layout.rotated_slot(slot)) continue;
        float* __restrict a = data + r * width + slot * hd;
        float* __restrict b = a + half;
        for (std::int64_t i = 0; i < half; ++i) {
          const float ai = a[i], bi = b[i], si = sign * sr[i];
          a[i] = ai * cr[i] - bi * si;
          b[i] = bi * cr[i] + ai * si;
        }
      }
    }
    return;
  }
  const QkvLayout L = layout;
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::rope::rotate"), Range(0, rows * slots * half),
      KOKKOS_LAMBDA(const std::int64_t e) {
        const std::int64_t i = e % half, slot = (e / half) % slots, r = e / (half * slots);
        if (!L.rotated_slot(slot)) return;
        const std::int64_t p = p0 + r % T;
        const float ci = cos(p * half + i), si = sign * sin(p * half + i);
        const float ai = x(r, slot * hd + i), bi = x(r, slot * hd + half + i);
        x(r, slot * hd + i) = ai * ci - bi * si;
        x(r, slot * hd + half + i) = bi * ci + ai * si;
      });
}

}  // namespace

std::vector<float> rope_inverse_frequencies(const RopeSpec& spec, int head_dim) {
  TRELLIS_REQUIRE(head_dim > 0 && head_dim % 2 == 0,
                  "rope: head_dim must be positive and even, got " + std::to_string(head_dim));
  if (!(spec.theta > 1.0))
    throw ConfigError("config key model.rope_theta must be > 1, got " + std::to_string(spec.theta));
  if (spec.factor != 0.0 &&
      !(spec.factor >= 1.0 && spec.low_freq_factor > 0.0 &&
        spec.high_freq_factor > spec.low_freq_factor && spec.original_context > 0))
    throw ConfigError(
        "config key model.rope_scaling: need factor >= 1, 0 < low_freq_factor < "
        "high_freq_factor and original context > 0 (factor " +
        std::to_string(spec.factor) + ", low " + std::to_string(spec.low_freq_factor) + ", high " +
        std::to_string(spec.high_freq_factor) + ", context " +
        std::to_string(spec.original_context) + ")");
  std::vector<float> inv(static_cast<std::size_t>(head_dim / 2));
  for (std::size_t i = 0; i < inv.size(); ++i) {
    // HF rounds theta^(2i/hd) to float before inverting (torch float32 pow and division).
    const float power =
        static_cast<float>(std::pow(spec.theta, static_cast<double>(2 * i) / head_dim));
    double f = 1.0 / static_cast<double>(power);
    if (spec.factor != 0.0) f = llama3_scaled(spec, static_cast<double>(static_cast<float>(f)));
    inv[i] = static_cast<float>(f);
  }
  return inv;
}

void rope_tables(const RopeSpec& spec, int head_dim, int positions, Vector cos, Vector sin) {
  const std::vector<float> inv = rope_inverse_frequencies(spec, head_dim);
  const std::size_t half = inv.size(), need = static_cast<std::size_t>(positions) * half;
  TRELLIS_REQUIRE(positions > 0 && cos.extent(0) == need && sin.extent(0) == need,
                  "rope_tables: tables " + extents_string(cos) + " / " + extents_string(sin) +
                      " for " + std::to_string(positions) + " positions of " +
                      std::to_string(half) + " frequencies");
  std::vector<float> c(need), s(need);
  for (std::size_t p = 0; p < static_cast<std::size_t>(positions); ++p) {
    for (std::size_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(p) * inv[i];
      c[p * half + i] = static_cast<float>(std::cos(static_cast<double>(angle)));
      s[p * half + i] = static_cast<float>(std::sin(static_cast<double>(angle)));
    }
  }
  using HostVector = Kokkos::View<const float*, HostSpace, Unmanaged>;
  Kokkos::deep_copy(cos, HostVector(c.data(), need));
  Kokkos::deep_copy(sin, HostVector(s.data(), need));
}

void rope_forward(Matrix qkv, const QkvLayout& layout, int seq_len, int first_position,
                  ConstVector cos, ConstVector sin) {
  check_call("rope_forward", qkv, layout, seq_len, first_position, cos, sin);
  rotate(qkv, layout, seq_len, first_position, cos, sin, 1.0f);
}

void rope_backward(Matrix dqkv, const QkvLayout& layout, int seq_len, int first_position,
                   ConstVector cos, ConstVector sin) {
  check_call("rope_backward", dqkv, layout, seq_len, first_position, cos, sin);
  rotate(dqkv, layout, seq_len, first_position, cos, sin, -1.0f);
}

}  // namespace trellis::kernels
