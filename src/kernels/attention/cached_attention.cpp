#include "trellis/kernels/attention/cached_attention.hpp"

#include "trellis/core/fast_math.hpp"
#include "trellis/core/kernel_label.hpp"
#include "trellis/core/math.hpp"

#include <string>

namespace trellis::kernels {

namespace {

void check(const char* who, const ConstMatrix& qkv, const QkvLayout& L, std::size_t k_rows,
           std::size_t k_cols, std::size_t v_rows, std::size_t v_cols, int first_position,
           std::size_t out_rows, std::size_t out_cols, bool has_out) {
  const std::size_t rows = qkv.extent(0), kvd = static_cast<std::size_t>(L.n_kv_head * L.head_dim);
  const std::size_t need = static_cast<std::size_t>(first_position) + rows;
  const bool ok =
      L.n_head > 0 && L.n_kv_head > 0 && L.head_dim > 0 && L.n_head % L.n_kv_head == 0 &&
      first_position >= 0 && static_cast<std::int64_t>(qkv.extent(1)) == L.width() &&
      k_rows >= need && v_rows >= need && k_cols == kvd && v_cols == kvd &&
      (!has_out ||
       (out_rows == rows && out_cols == static_cast<std::size_t>(L.n_head * L.head_dim)));
  TRELLIS_REQUIRE(
      ok,
      std::string(who) + ": qkv " + extents_string(qkv) + ", " + std::to_string(L.n_head) +
          " heads and " + std::to_string(L.n_kv_head) + " kv heads of " +
          std::to_string(L.head_dim) + ", caches [" + std::to_string(k_rows) + ", " +
          std::to_string(k_cols) + "] / [" + std::to_string(v_rows) + ", " +
          std::to_string(v_cols) + "], first position " + std::to_string(first_position) +
          (has_out ? ", out [" + std::to_string(out_rows) + ", " + std::to_string(out_cols) + "]"
                   : std::string()) +
          " (need caches of first position + rows rows and kv heads x head_dim "
          "columns, out [rows, heads x head_dim])");
}

}  // namespace

void cached_attention(ConstMatrix qkv, const QkvLayout& layout, ConstMatrix k_cache,
                      ConstMatrix v_cache, int first_position, Matrix out) {
  check("cached_attention", qkv, layout, k_cache.extent(0), k_cache.extent(1), v_cache.extent(0),
        v_cache.extent(1), first_position, out.extent(0), out.extent(1), true);
  const QkvLayout L = layout;
  const std::int64_t H = L.n_head, hd = L.head_dim, g = L.group_size();
  const std::int64_t p0 = first_position;
  const float scale = 1.0f / math::sqrt(static_cast<float>(hd));
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::cached_attention"),
      Range(0, static_cast<std::int64_t>(qkv.extent(0)) * H), KOKKOS_LAMBDA(const std::int64_t e) {
        const std::int64_t r = e / H, h = e % H, kv_col = (h / g) * hd, q_col = L.q_col(h);
        const std::int64_t keys = p0 + r + 1;  // causal: positions <= p0 + r
        float m = -3.0e38f;
        for (std::int64_t j = 0; j < keys; ++j) {
          float s = 0.0f;
          for (std::int64_t i = 0; i < hd; ++i) s += qkv(r, q_col + i) * k_cache(j, kv_col + i);
          m = s * scale > m ? s * scale : m;
        }
        for (std::int64_t i = 0; i < hd; ++i) out(r, h * hd + i) = 0.0f;
        float sum = 0.0f;
        for (std::int64_t j = 0; j < keys; ++j) {
          float s = 0.0f;
          for (std::int64_t i = 0; i < hd; ++i) s += qkv(r, q_col + i) * k_cache(j, kv_col + i);
          const float p = math::fast_exp(s * scale - m);
          sum += p;
          for (std::int64_t i = 0; i < hd; ++i) out(r, h * hd + i) += p * v_cache(j, kv_col + i);
        }
        const float inv = 1.0f / sum;
        for (std::int64_t i = 0; i < hd; ++i) out(r, h * hd + i) *= inv;
      });
}

void append_kv_cache(ConstMatrix qkv, const QkvLayout& layout, int first_position, Matrix k_cache,
                     Matrix v_cache) {
  check("append_kv_cache", qkv, layout, k_cache.extent(0), k_cache.extent(1), v_cache.extent(0),
        v_cache.extent(1), first_position, 0, 0, false);
  const QkvLayout L = layout;
  const std::int64_t hd = L.head_dim, kvd = L.n_kv_head * hd, p0 = first_position;
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::append_kv_cache"),
      Range(0, static_cast<std::int64_t>(qkv.extent(0)) * kvd),
      KOKKOS_LAMBDA(const std::int64_t e) {
        const std::int64_t r = e / kvd, c = e % kvd, j = c / hd, i = c % hd;
        k_cache(p0 + r, c) = qkv(r, L.k_col(j) + i);
        v_cache(p0 + r, c) = qkv(r, L.v_col(j) + i);
      });
}

}  // namespace trellis::kernels
