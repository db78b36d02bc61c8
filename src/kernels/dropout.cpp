#include "trellis/kernels/dropout.hpp"

#include "trellis/core/kernel_label.hpp"

#include <string>

namespace trellis::kernels {

void dropout_apply(ConstMatrix in, Matrix out, const DropoutMask& mask) {
  require_same_shape(in, out, "dropout_apply");
  TRELLIS_REQUIRE(mask.p >= 0.0f && mask.p < 1.0f,
                  "dropout probability must be in [0, 1), got " + std::to_string(mask.p));
  const std::uint64_t cols = in.extent(1);
  const float keep_scale = 1.0f / (1.0f - mask.p);
  const float* ip = in.data();
  float* op = out.data();
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::dropout::apply"),
      Range(0, static_cast<std::int64_t>(in.size())), KOKKOS_LAMBDA(const std::int64_t i) {
        const std::uint64_t e = static_cast<std::uint64_t>(i);
        op[i] = dropout_keep(mask, e / cols, e % cols, cols) ? ip[i] * keep_scale : 0.0f;
      });
}

}  // namespace trellis::kernels
