// The tensor list every rank agrees on, and the checks and HDF5 pieces shared by the tensor
// file's writer and reader.
#include "tensor_file_impl.hpp"

#include "trellis/comm/mpi_check.hpp"
#include "trellis/core/tensor_list_codec.hpp"

#include <algorithm>
#include <climits>
#include <map>
#include <set>

namespace trellis::tensor_file {

void LayoutHash::bytes(const void* data, std::size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < size; ++i) value = (value ^ p[i]) * 1099511628211ull;
}

void LayoutHash::text(const std::string& s) {
  integer(static_cast<std::int64_t>(s.size()));
  bytes(s.data(), s.size());
}

bool same_on_all_ranks(MPI_Comm comm, std::uint64_t hash) {
  std::uint64_t mine[2] = {hash, ~hash};
  std::uint64_t max[2] = {0, 0};
  TRELLIS_MPI(MPI_Allreduce(mine, max, 2, MPI_UINT64_T, MPI_MAX, comm));
  return max[0] == ~max[1];
}

std::vector<FileTensor> file_tensors(const std::vector<TensorPiece>& pieces, MPI_Comm comm) {
  int rank = 0, size = 1;
  TRELLIS_MPI(MPI_Comm_rank(comm, &rank));
  TRELLIS_MPI(MPI_Comm_size(comm, &size));
  std::string mine;  // names and shapes, no values
  for (const TensorPiece& p : pieces) encode_tensor(mine, p.name, p.logical_shape);
  LayoutHash hash;
  hash.text(mine);
  std::vector<std::uint64_t> hashes(static_cast<std::size_t>(size));
  TRELLIS_MPI(MPI_Allgather(&hash.value, 1, MPI_UINT64_T, hashes.data(), 1, MPI_UINT64_T, comm));
  std::vector<FileTensor> tensors;
  std::map<std::string, std::vector<const TensorPiece*>> held;  // name -> parts, piece order
  for (const TensorPiece& p : pieces)
    if (p.held) held[p.name].push_back(&p);
  for (auto& [name, parts] : held)
    std::sort(parts.begin(), parts.end(), [](const TensorPiece* a, const TensorPiece* b) {
      return a->part_begin() < b->part_begin();
    });
  if (std::all_of(hashes.begin(), hashes.end(), [&](std::uint64_t h) { return h == hashes[0]; })) {
    std::set<std::string> listed;
    for (const TensorPiece& p : pieces) {
      if (!listed.insert(p.name).second) continue;
      const auto it = held.find(p.name);
      tensors.push_back({p.name, p.logical_shape,
                         it == held.end() ? std::vector<const TensorPiece*>{} : it->second});
    }
    return tensors;
  }
  // Only the lowest rank of each distinct list sends it.
  const auto me = static_cast<std::size_t>(rank);
  if (std::find(hashes.begin(), hashes.end(), hashes[me]) - hashes.begin() != rank) mine.clear();
  TRELLIS_REQUIRE(mine.size() < static_cast<std::size_t>(INT_MAX), "tensor list too long");
  const int count = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<std::size_t>(size)), offsets(counts.size(), 0);
  TRELLIS_MPI(MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, comm));
  std::int64_t total = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    offsets[r] = static_cast<int>(total);
    total += counts[r];
    TRELLIS_REQUIRE(total < INT_MAX, "tensor lists too long");
  }
  std::string all(static_cast<std::size_t>(total), '\0');
  TRELLIS_MPI(MPI_Allgatherv(mine.data(), count, MPI_CHAR, all.data(), counts.data(),
                             offsets.data(), MPI_CHAR, comm));
  std::map<std::string, Shape> shapes;
  for (const HostTensor& t : decode_tensors(all)) {
    const auto [it, added] = shapes.emplace(t.name, t.shape);
    if (!added && it->second != t.shape)
      throw Error("tensor '" + t.name + "': the ranks give it different logical shapes, " +
                  shape_string(it->second) + " and " + shape_string(t.shape));
  }
  for (const auto& [name, shape] : shapes) {
    const auto it = held.find(name);
    tensors.push_back(
        {name, shape, it == held.end() ? std::vector<const TensorPiece*>{} : it->second});
  }
  return tensors;
}

namespace {

void check_piece(const TensorPiece& p) {
  if (p.name.empty() || p.name.front() == '/' || p.name.back() == '/' ||
      p.name.find("//") != std::string::npos)
    throw Error("bad tensor name '" + p.name + "' (expected a relative HDF5 path like a/b.c)");
  p.part_end();  // throws for a bad shape, spec or range
}

void check_local_size(const TensorPiece& p) {
  const std::size_t numel = p.part_end() - p.part_begin();
  if (p.local.extent(0) != numel)
    throw Error("tensor '" + p.name + "': local piece has " + std::to_string(p.local.extent(0)) +
                " elements, its " + (p.whole_piece() ? "shard" : "range of its shard") + " of " +
                shape_string(p.logical_shape) + " has " + std::to_string(numel));
}

}  // namespace

std::size_t FileTensor::local_count() const {
  std::size_t count = 0;
  for (const TensorPiece* p : parts) count += p->local.extent(0);
  return count;
}

void check_pieces(const std::vector<TensorPiece>& pieces, bool for_writing) {
  std::map<std::string, std::vector<const TensorPiece*>> by_name;
  for (const TensorPiece& p : pieces) {
    check_piece(p);
    by_name[p.name].push_back(&p);
    if (!p.held && p.writer) throw Error("tensor '" + p.name + "': a writer must hold a piece");
    if (p.held && (p.writer || !for_writing)) check_local_size(p);
  }
  // A name given more than once: disjoint ranges of one piece, all held, writers alike.
  for (auto& [name, parts] : by_name) {
    if (parts.size() < 2) continue;
    std::sort(parts.begin(), parts.end(), [](const TensorPiece* a, const TensorPiece* b) {
      return a->part_begin() < b->part_begin();
    });
    for (std::size_t k = 0; k < parts.size(); ++k) {
      const TensorPiece& p = *parts[k];
      const TensorPiece& q = *parts[0];
      if (p.whole_piece() || !p.held || p.writer != q.writer ||
          p.logical_shape != q.logical_shape || p.shard.dim != q.shard.dim ||
          p.shard.parts != q.shard.parts || p.shard.index != q.shard.index ||
          p.shard.sections != q.shard.sections)
        throw Error("tensor '" + name +
                    "' appears twice (only disjoint ranges of one piece may repeat a name)");
      if (k > 0 && parts[k - 1]->part_end() > p.part_begin())
        throw Error("tensor '" + name + "': overlapping ranges");
    }
  }
}

H5Space file_space(const Shape& logical) {
  if (logical.empty()) return H5Space(TRELLIS_H5(H5Screate(H5S_SCALAR)));
  const std::vector<hsize_t> dims(logical.begin(), logical.end());
  return H5Space(TRELLIS_H5(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr)));
}

H5Space memory_space(std::size_t count) {
  const hsize_t size = std::max<hsize_t>(count, 1);
  H5Space space(TRELLIS_H5(H5Screate_simple(1, &size, nullptr)));
  if (count == 0) TRELLIS_H5(H5Sselect_none(space.get()));
  return space;
}

Shape dataset_shape(hid_t dataset) {
  H5Space space(TRELLIS_H5(H5Dget_space(dataset)));
  const int rank = TRELLIS_H5(H5Sget_simple_extent_ndims(space.get()));
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  if (rank > 0) TRELLIS_H5(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr));
  return Shape(dims.begin(), dims.end());
}

void check_float32(hid_t dataset) {
  H5Type type(TRELLIS_H5(H5Dget_type(dataset)));
  if (H5Tget_class(type.get()) != H5T_FLOAT || H5Tget_size(type.get()) != 4)
    throw InputError("expected float32, found " + hdf5_type_name(type.get()));
}

H5File open_parallel(const std::string& path, MPI_Comm comm, const Hdf5Tuning& tuning,
                     const std::function<void(hid_t)>& check_root) {
  Hdf5Tuning t = tuning;
  t.collective_metadata_reads = false;  // tensors are opened by single ranks (verify)
  H5Plist fapl = make_parallel_file_access(comm, t);
  const hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get());
  if (id < 0)
    throw InputError("cannot open the file (missing, truncated or not HDF5): " +
                     hdf5_error_detail());
  H5File file(id);
  check_root(file.get());
  return file;
}

}  // namespace trellis::tensor_file
