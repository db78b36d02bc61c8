#include "trellis/parallel/logical_tensors.hpp"

#include "trellis/comm/mpi_check.hpp"
#include "trellis/core/error.hpp"

#include <algorithm>
#include <climits>

#include <cstdint>

namespace trellis {

std::vector<float> unshard(const std::vector<float>& gathered, const nn::ParamInfo& info) {
  const nn::ShardSpec& s = info.shard;
  if (!s.sharded()) return gathered;
  TRELLIS_REQUIRE(
      gathered.size() == static_cast<std::size_t>(s.parts) * info.numel,
      "unshard: " + std::to_string(gathered.size()) + " values for \"" + info.name + "\"");
  std::vector<float> logical(gathered.size());
  for (int part = 0; part < s.parts; ++part) {
    nn::ShardSpec piece = s;
    piece.index = part;
    const kernels::ShardIndexMap map = piece.index_map(info.logical_shape);
    const float* from = gathered.data() + static_cast<std::size_t>(part) * info.numel;
    for (std::size_t e = 0; e < info.numel; ++e) logical[map(e)] = from[e];
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

namespace {

void send_bytes(const std::string& data, int peer, const MpiComm& comm) {
  const auto size = static_cast<std::int64_t>(data.size());
  TRELLIS_MPI(MPI_Send(&size, 1, MPI_INT64_T, peer, 0, comm.get()));
  TRELLIS_REQUIRE(data.size() <= static_cast<std::size_t>(INT_MAX), "stage tensors too large");
  TRELLIS_MPI(MPI_Send(data.data(), static_cast<int>(data.size()), MPI_CHAR, peer, 0, comm.get()));
}

std::string recv_bytes(int peer, const MpiComm& comm) {
  std::int64_t size = 0;
  TRELLIS_MPI(MPI_Recv(&size, 1, MPI_INT64_T, peer, 0, comm.get(), MPI_STATUS_IGNORE));
  std::string data(static_cast<std::size_t>(size), '\0');
  TRELLIS_MPI(MPI_Recv(data.data(), static_cast<int>(size), MPI_CHAR, peer, 0, comm.get(),
                       MPI_STATUS_IGNORE));
  return data;
}

}  // namespace

std::vector<HostTensor> gather_stages(std::vector<HostTensor> mine, const MpiComm& pp,
                                      const std::vector<std::string>& skip) {
  if (pp.size() == 1) return mine;
  if (pp.rank() != 0) {
    std::string packed;
    for (const HostTensor& t : mine)
      if (std::find(skip.begin(), skip.end(), t.name) == skip.end())
        encode_tensor(packed, t.name, t.shape, t.values.data(), t.values.size());
    send_bytes(packed, 0, pp);
    return {};
  }
  std::vector<HostTensor> all = std::move(mine);
  for (int stage = 1; stage < pp.size(); ++stage)
    for (HostTensor& t : decode_tensors(recv_bytes(stage, pp))) all.push_back(std::move(t));
  return all;
}

}  // namespace trellis
