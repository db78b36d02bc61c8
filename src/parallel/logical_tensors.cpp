#include "trellis/parallel/logical_tensors.hpp"

#include "trellis/core/error.hpp"

#include <cstdint>

namespace trellis {

std::vector<float> unshard(const std::vector<float>& gathered, const nn::ParamInfo& info) {
  const nn::ShardSpec& s = info.shard;
  if (!s.sharded()) return gathered;
  const auto dim = static_cast<std::size_t>(s.dim);
  std::size_t inner = 1, outer = 1;
  for (std::size_t k = dim + 1; k < info.logical_shape.size(); ++k)
    inner *= static_cast<std::size_t>(info.logical_shape[k]);
  for (std::size_t k = 0; k < dim; ++k) outer *= static_cast<std::size_t>(info.logical_shape[k]);
  const auto sections = static_cast<std::size_t>(s.sections);
  const auto parts = static_cast<std::size_t>(s.parts);
  const std::size_t piece = static_cast<std::size_t>(info.logical_shape[dim]) / (sections * parts);
  const std::size_t block = piece * inner;  // one piece of one section of one outer index
  TRELLIS_REQUIRE(
      gathered.size() == parts * info.numel,
      "unshard: " + std::to_string(gathered.size()) + " values for \"" + info.name + "\"");
  std::vector<float> logical(gathered.size());
  for (std::size_t p = 0; p < parts; ++p)
    for (std::size_t o = 0; o < outer; ++o)
      for (std::size_t sec = 0; sec < sections; ++sec) {
        const float* from = gathered.data() + p * info.numel + (o * sections + sec) * block;
        float* to = logical.data() + ((o * sections + sec) * parts + p) * block;
        std::copy(from, from + block, to);
      }
  return logical;
}

std::vector<HostTensor> logical_parameters(const nn::ParameterStore& store, Communicator& tp) {
  std::vector<HostTensor> all;
  all.reserve(store.size());
  for (std::size_t i = 0; i < store.size(); ++i) {
    const nn::ParamInfo& info = store.info(i);
    HostTensor t{info.name, info.logical_shape, {}};
    if (!info.shard.sharded()) {
      auto host = Kokkos::create_mirror_view_and_copy(HostSpace(), store.param(i));
      t.values.assign(host.data(), host.data() + info.numel);
    } else {
      TRELLIS_REQUIRE(info.shard.parts == tp.size(),
                      "\"" + info.name + "\" is split " + std::to_string(info.shard.parts) +
                          " ways, the tp group has " + std::to_string(tp.size()) + " ranks");
      FloatView gathered("trellis::gather." + info.name, info.numel * info.shard.parts);
      tp.all_gather(store.param(i).data(), gathered.data(), info.numel);
      auto host = Kokkos::create_mirror_view_and_copy(HostSpace(), gathered);
      t.values = unshard(std::vector<float>(host.data(), host.data() + host.extent(0)), info);
    }
    all.push_back(std::move(t));
  }
  return all;
}

}  // namespace trellis
