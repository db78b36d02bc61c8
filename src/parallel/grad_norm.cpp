#include "trellis/parallel/grad_norm.hpp"

#include "trellis/parallel/tensor_ownership.hpp"

#include <algorithm>
#include <vector>

namespace trellis {

MaskView norm_mask(const nn::ParameterStore& store, const GridCoords& at,
                   const std::vector<std::string>& stage_copies) {
  std::vector<std::uint8_t> host(store.buffer_size(), 0);
  for (std::size_t i = 0; i < store.size(); ++i) {
    const nn::ParamInfo& info = store.info(i);
    const bool copy =
        std::find(stage_copies.begin(), stage_copies.end(), info.name) != stage_copies.end();
    if (owns_piece(info.shard.sharded(), copy, DpCopies::distinct, at))
      std::fill(host.begin() + static_cast<std::ptrdiff_t>(info.offset),
                host.begin() + static_cast<std::ptrdiff_t>(info.offset + info.numel), 1);
  }
  MaskView mask("trellis::norm_mask", host.size());
  Kokkos::deep_copy(
      mask, Kokkos::View<const std::uint8_t*, HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
                host.data(), host.size()));
  return mask;
}

}  // namespace trellis
