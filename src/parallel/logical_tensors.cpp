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

namespace {

// A flat wire format for host tensors, three streams: header (int64: count, then per tensor
// name length, rank, dims...), the names' characters, and the elements.
struct Packed {
  std::vector<std::int64_t> header;
  std::vector<char> names;
  std::vector<float> values;
};

Packed pack(const std::vector<HostTensor>& tensors, const std::vector<std::string>& skip) {
  Packed p;
  p.header.push_back(0);
  for (const HostTensor& t : tensors) {
    if (std::find(skip.begin(), skip.end(), t.name) != skip.end()) continue;
    ++p.header[0];
    p.header.push_back(static_cast<std::int64_t>(t.name.size()));
    p.header.push_back(static_cast<std::int64_t>(t.shape.size()));
    p.header.insert(p.header.end(), t.shape.begin(), t.shape.end());
    p.names.insert(p.names.end(), t.name.begin(), t.name.end());
    p.values.insert(p.values.end(), t.values.begin(), t.values.end());
  }
  return p;
}

void unpack(const Packed& p, std::vector<HostTensor>& out) {
  std::size_t h = 1, n = 0, v = 0;
  for (std::int64_t i = 0; i < p.header[0]; ++i) {
    HostTensor t;
    const auto name_length = static_cast<std::size_t>(p.header[h++]);
    const auto rank = static_cast<std::size_t>(p.header[h++]);
    t.shape.assign(p.header.begin() + static_cast<std::ptrdiff_t>(h),
                   p.header.begin() + static_cast<std::ptrdiff_t>(h + rank));
    h += rank;
    t.name.assign(p.names.begin() + static_cast<std::ptrdiff_t>(n),
                  p.names.begin() + static_cast<std::ptrdiff_t>(n + name_length));
    n += name_length;
    const auto numel = static_cast<std::size_t>(shape_numel(t.shape));
    t.values.assign(p.values.begin() + static_cast<std::ptrdiff_t>(v),
                    p.values.begin() + static_cast<std::ptrdiff_t>(v + numel));
    v += numel;
    out.push_back(std::move(t));
  }
}

template <class T>
void send_vector(const std::vector<T>& data, MPI_Datatype type, int peer, const MpiComm& comm) {
  std::int64_t size = static_cast<std::int64_t>(data.size());
  TRELLIS_MPI(MPI_Send(&size, 1, MPI_INT64_T, peer, 0, comm.get()));
  TRELLIS_REQUIRE(data.size() <= static_cast<std::size_t>(INT_MAX), "stage tensors too large");
  TRELLIS_MPI(MPI_Send(data.data(), static_cast<int>(data.size()), type, peer, 0, comm.get()));
}

template <class T>
std::vector<T> recv_vector(MPI_Datatype type, int peer, const MpiComm& comm) {
  std::int64_t size = 0;
  TRELLIS_MPI(MPI_Recv(&size, 1, MPI_INT64_T, peer, 0, comm.get(), MPI_STATUS_IGNORE));
  std::vector<T> data(static_cast<std::size_t>(size));
  TRELLIS_MPI(
      MPI_Recv(data.data(), static_cast<int>(size), type, peer, 0, comm.get(), MPI_STATUS_IGNORE));
  return data;
}

}  // namespace

std::vector<HostTensor> gather_stages(std::vector<HostTensor> mine, const MpiComm& pp,
                                      const std::vector<std::string>& skip) {
  if (pp.size() == 1) return mine;
  if (pp.rank() != 0) {
    const Packed p = pack(mine, skip);
    send_vector(p.header, MPI_INT64_T, 0, pp);
    send_vector(p.names, MPI_CHAR, 0, pp);
    send_vector(p.values, MPI_FLOAT, 0, pp);
    return {};
  }
  std::vector<HostTensor> all = std::move(mine);
  for (int stage = 1; stage < pp.size(); ++stage) {
    Packed p;
    p.header = recv_vector<std::int64_t>(MPI_INT64_T, stage, pp);
    p.names = recv_vector<char>(MPI_CHAR, stage, pp);
    p.values = recv_vector<float>(MPI_FLOAT, stage, pp);
    unpack(p, all);
  }
  return all;
}

}  // namespace trellis
