#include "trellis/parallel/grad_norm.hpp"

#include <algorithm>
#include <vector>

namespace trellis {

FloatView norm_mask(const nn::ParameterStore& store, int tp_rank,
                    const std::vector<std::string>& copies) {
  std::vector<float> host(store.buffer_size(), 0.0f);
  for (std::size_t i = 0; i < store.size(); ++i) {
    const nn::ParamInfo& info = store.info(i);
    const bool copy = std::find(copies.begin(), copies.end(), info.name) != copies.end();
    if (!copy && (info.shard.sharded() || tp_rank == 0))
      std::fill(host.begin() + static_cast<std::ptrdiff_t>(info.offset),
                host.begin() + static_cast<std::ptrdiff_t>(info.offset + info.numel), 1.0f);
  }
  FloatView mask("trellis::norm_mask", host.size());
  Kokkos::deep_copy(mask,
                    Kokkos::View<const float*, HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
                        host.data(), host.size()));
  return mask;
}

}  // namespace trellis
