#include "trellis/kernels/embedding.hpp"

#include "trellis/core/host_simd.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/kernel_label.hpp"

#include <string>

namespace trellis::kernels {

void embedding_forward(ConstLabels tokens, ConstMatrix weight, Matrix out, const std::string& table,
                       std::int64_t vocab_offset, std::int64_t logical_vocab) {
  const std::int64_t rows = static_cast<std::int64_t>(out.extent(0));
  const std::int64_t d = static_cast<std::int64_t>(out.extent(1));
  const std::int64_t local_vocab = static_cast<std::int64_t>(weight.extent(0));
  const std::int64_t vocab = logical_vocab < 0 ? local_vocab : logical_vocab;
  TRELLIS_REQUIRE(
      weight.extent(1) == out.extent(1),
      "embedding_forward: table " + extents_string(weight) + " for output " + extents_string(out));
  TRELLIS_REQUIRE(tokens.extent(0) >= out.extent(0),
                  "embedding_forward: " + std::to_string(tokens.extent(0)) + " token ids for " +
                      std::to_string(rows) + " rows");
  std::int64_t first_bad = 0;  // reduced with Min: the largest int64 when every id is valid
  Kokkos::parallel_reduce(
      TRELLIS_KERNEL_LABEL("trellis::embedding::fwd"), Range(0, rows),
      KOKKOS_LAMBDA(const std::int64_t r, std::int64_t& bad) {
        const std::int64_t id = tokens(r);
        if (id < 0 || id >= vocab) {
          if (r < bad) bad = r;
          for (std::int64_t j = 0; j < d; ++j) out(r, j) = 0.0f;
          return;
        }
        const std::int64_t local = id - vocab_offset;
        if (local < 0 || local >= local_vocab) {
          for (std::int64_t j = 0; j < d; ++j) out(r, j) = 0.0f;
          return;
        }
        for (std::int64_t j = 0; j < d; ++j) out(r, j) = weight(local, j);
      },
      Kokkos::Min<std::int64_t>(first_bad));
  if (rows > 0 && first_bad < rows) {
    std::int32_t value = 0;
    Kokkos::View<std::int32_t, HostSpace> host_value(&value);
    Kokkos::deep_copy(host_value, Kokkos::subview(tokens, first_bad));
    throw InputError("embedding \"" + table + "\": token id " + std::to_string(value) +
                     " at position " + std::to_string(first_bad) + " is outside [0, " +
                     std::to_string(vocab) + ")");
  }
}

void embedding_backward(ConstLabels tokens, ConstMatrix dy, Matrix dweight,
                        std::int64_t vocab_offset) {
  const std::int64_t rows = static_cast<std::int64_t>(dy.extent(0));
  const std::int64_t vocab = static_cast<std::int64_t>(dweight.extent(0));
  TRELLIS_REQUIRE(dweight.extent(1) == dy.extent(1),
                  "embedding_backward: table gradient " + extents_string(dweight) +
                      " for output gradient " + extents_string(dy));
  TRELLIS_REQUIRE(tokens.extent(0) >= dy.extent(0),
                  "embedding_backward: " + std::to_string(tokens.extent(0)) + " token ids for " +
                      std::to_string(rows) + " rows");
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::embedding::bwd"),
      Range(0, static_cast<std::int64_t>(dy.extent(1))), KOKKOS_LAMBDA(const std::int64_t j) {
        for (std::int64_t r = 0; r < rows; ++r) {
          const std::int64_t id = tokens(r) - vocab_offset;
          if (id >= 0 && id < vocab) dweight(id, j) += dy(r, j);
        }
      });
}

namespace {

// y = x + pos per block of span = T * d values (a sequence): no division per element.
TRELLIS_HOST_CLONES
void position_add_host(const float* __restrict x, const float* __restrict pos, std::int64_t total,
                       std::int64_t span, float* __restrict y) {
  for (std::int64_t start = 0; start < total; start += span) {
    const std::int64_t len = total - start < span ? total - start : span;
    for (std::int64_t e = 0; e < len; ++e) y[start + e] = x[start + e] + pos[e];
  }
}

}  // namespace

void position_add(ConstMatrix x, ConstMatrix pos, Matrix y) {
  require_same_shape(x, y, "position_add");
  TRELLIS_REQUIRE(
      pos.extent(1) == x.extent(1) && pos.extent(0) > 0,
      "position_add: positions " + extents_string(pos) + " for rows " + extents_string(x));
  const std::int64_t span = static_cast<std::int64_t>(pos.size());  // T * d
  const float* xp = x.data();
  const float* pp = pos.data();
  float* yp = y.data();
  if constexpr (kHostKernels) {
    position_add_host(xp, pp, static_cast<std::int64_t>(x.size()), span, yp);
    return;
  }
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::position::fwd"), Range(0, static_cast<std::int64_t>(x.size())),
      KOKKOS_LAMBDA(const std::int64_t i) { yp[i] = xp[i] + pp[i % span]; });
}

void position_backward(ConstMatrix dy, Matrix dpos) {
  TRELLIS_REQUIRE(dpos.extent(1) == dy.extent(1) && dpos.extent(0) > 0,
                  "position_backward: position gradient " + extents_string(dpos) + " for rows " +
                      extents_string(dy));
  const std::int64_t span = static_cast<std::int64_t>(dpos.size());  // T * d
  const std::int64_t total = static_cast<std::int64_t>(dy.size());
  const float* dyp = dy.data();
  float* dpp = dpos.data();
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::position::bwd"), Range(0, span),
      KOKKOS_LAMBDA(const std::int64_t e) {
        float sum = 0.0f;
        for (std::int64_t i = e; i < total; i += span) sum += dyp[i];
        dpp[e] += sum;
      });
}

}  // namespace trellis::kernels
