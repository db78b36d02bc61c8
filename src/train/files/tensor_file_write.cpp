// write_tensor_file(): the collective parallel HDF5 writer of checkpoints and model weights.
#include "trellis/train/files/tensor_file.hpp"

#include "tensor_file_impl.hpp"
#include "trellis/comm/agreement.hpp"
#include "trellis/comm/mpi_check.hpp"
#include "trellis/data/hdf5_attributes.hpp"

#include <unistd.h>

namespace trellis {

namespace {

using tensor_file::FileTensor;

// The open file being written. The file is declared first, so that it closes after its
// datasets.
struct OpenFile {
  H5File file;
  H5Plist lcpl, dcpl, dxpl;
  std::vector<H5Dataset> datasets;
};

OpenFile create_file(const std::string& path, MPI_Comm comm, const Hdf5Tuning& tuning) {
  Hdf5Tuning t = tuning;
  t.collective_metadata_reads = false;
  H5Plist fapl = make_parallel_file_access(comm, t);
  if (tuning.alignment > 1)
    TRELLIS_H5(H5Pset_alignment(fapl.get(), tuning.alignment_threshold, tuning.alignment));
  OpenFile f;
  f.file = H5File(TRELLIS_H5(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get())));
  f.lcpl = H5Plist(TRELLIS_H5(H5Pcreate(H5P_LINK_CREATE)));
  TRELLIS_H5(H5Pset_create_intermediate_group(f.lcpl.get(), 1));
  f.dcpl = H5Plist(TRELLIS_H5(H5Pcreate(H5P_DATASET_CREATE)));
  TRELLIS_H5(H5Pset_fill_time(f.dcpl.get(), H5D_FILL_TIME_NEVER));  // every element is written
  TRELLIS_H5(H5Pset_alloc_time(f.dcpl.get(), H5D_ALLOC_TIME_EARLY));
  f.dxpl = H5Plist(TRELLIS_H5(H5Pcreate(H5P_DATASET_XFER)));
  TRELLIS_H5(H5Pset_dxpl_mpio(f.dxpl.get(), H5FD_MPIO_COLLECTIVE));
  return f;
}

// Collective: creates t's dataset and writes `host` (this rank's part; empty: nothing, the
// rank takes part with an empty selection).
void write_tensor(OpenFile& f, const FileTensor& t, const HostFloatView& host) {
  H5Space space = tensor_file::file_space(t.shape);
  f.datasets.emplace_back(
      TRELLIS_H5(H5Dcreate2(f.file.get(), t.name.c_str(), H5T_IEEE_F32LE, space.get(), f.lcpl.get(),
                            f.dcpl.get(), H5P_DEFAULT)));
  // An empty tensor has no storage to write to (HDF5 fails even an empty transfer); every
  // rank skips it alike.
  if (shape_numel(t.shape) == 0) return;
  const std::size_t count = host.extent(0);
  tensor_file::select_parts(space.get(), count > 0 ? t.parts : std::vector<const TensorPiece*>{});
  H5Space memory = tensor_file::memory_space(count);
  const float dummy = 0.0f;
  TRELLIS_H5(H5Dwrite(f.datasets.back().get(), H5T_NATIVE_FLOAT, memory.get(), space.get(),
                      f.dxpl.get(), count > 0 ? host.data() : &dummy));
}

// Closes a file whose write failed. Callers write to a temporary path and discard it, so its
// contents are worthless; but closing flushes HDF5's metadata, and where the failure was a full
// disk that flush fails too, which leaves HDF5 with a half-closed file that its own shutdown
// (run by MPI_Finalize) then crashes on. Emptying the file first gives the flush the space it
// needs. Collective: every rank gets here through the same agreed failure.
void close_after_failure(OpenFile& f, const std::string& path, MPI_Comm comm) {
  if (f.file.get() < 0) return;  // never created
  int rank = 0;
  TRELLIS_MPI(MPI_Comm_rank(comm, &rank));
  if (rank == 0) (void)::truncate(path.c_str(), 0);  // best effort: the close reports the rest
  TRELLIS_MPI(MPI_Barrier(comm));
  f.datasets.clear();
  f.file.reset();
}

void write_checksum(hid_t dataset, std::uint64_t checksum) {
  H5Space space(TRELLIS_H5(H5Screate(H5S_SCALAR)));
  H5Attribute attribute(TRELLIS_H5(
      H5Acreate2(dataset, "checksum", H5T_STD_U64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT)));
  TRELLIS_H5(H5Awrite(attribute.get(), H5T_NATIVE_UINT64, &checksum));
}

// Collective: the writers' parts must add up to each tensor exactly.
void check_coverage(const std::vector<FileTensor>& tensors, const std::string& prefix,
                    MPI_Comm comm) {
  const std::size_t n = tensors.size();
  std::vector<std::uint64_t> written(n, 0);
  for (std::size_t i = 0; i < n; ++i)
    if (tensors[i].writer()) written[i] = tensors[i].local_count();
  TRELLIS_MPI(MPI_Allreduce(MPI_IN_PLACE, written.data(), static_cast<int>(n), MPI_UINT64_T,
                            MPI_SUM, comm));
  for (std::size_t i = 0; i < n; ++i) {
    const auto numel = static_cast<std::uint64_t>(shape_numel(tensors[i].shape));
    if (written[i] != numel)
      throw Error(prefix + "tensor '" + tensors[i].name + "' " + shape_string(tensors[i].shape) +
                  ": the writers' pieces hold " + std::to_string(written[i]) +
                  " elements, the tensor has " + std::to_string(numel) +
                  " (exactly one writer per distinct piece)");
  }
}

// A writer's parts of t back to back on the host (one part: its own host mirror, no copy on
// host backends), and their position-keyed checksum added to `checksum`.
HostFloatView gather_parts(const FileTensor& t, std::uint64_t& checksum) {
  HostFloatView host;
  if (t.parts.size() == 1) {
    host = Kokkos::create_mirror_view_and_copy(HostSpace(), t.parts[0]->local);
  } else {
    host = HostFloatView("trellis::tensor_file::parts", t.local_count());
    std::size_t at = 0;
    for (const TensorPiece* p : t.parts) {
      const std::size_t n = p->local.extent(0);
      Kokkos::deep_copy(Kokkos::subview(host, std::make_pair(at, at + n)), p->local);
      at += n;
    }
  }
  std::size_t at = 0;
  for (const TensorPiece* p : t.parts) {
    const std::size_t n = p->local.extent(0);
    checksum += checkpoint_checksum(host.data() + at, n, p->shard.index_map(p->logical_shape),
                                    p->part_begin());
    at += n;
  }
  return host;
}

}  // namespace

void write_tensor_file(const std::string& path, const std::vector<TensorPiece>& pieces,
                       const std::function<void(hid_t file)>& write_root,
                       const std::vector<std::string>& groups, MPI_Comm comm,
                       const Hdf5Tuning& tuning, const TensorWriteHook& after_write) {
  hdf5_quiet();
  PhaseFailure failure;
  const std::string prefix = path + ": ";

  // 1. Local checks, then the tensors every rank takes part in, then their coverage.
  capture(failure, PhaseFailure::kWhole, prefix, false,
          [&] { tensor_file::check_pieces(pieces, true); });
  agree(comm, failure);
  const std::vector<FileTensor> tensors = tensor_file::file_tensors(pieces, comm);
  const std::size_t n = tensors.size();
  check_coverage(tensors, prefix, comm);

  OpenFile file;
  try {
    // 2. Create the file, its root attributes and groups (collective).
    capture(failure, PhaseFailure::kWhole, prefix, false, [&] {
      file = create_file(path, comm, tuning);
      write_root(file.file.get());
      for (const std::string& group : groups)
        H5Group(TRELLIS_H5(
            H5Gcreate2(file.file.get(), group.c_str(), file.lcpl.get(), H5P_DEFAULT, H5P_DEFAULT)));
      Kokkos::fence();
    });
    agree(comm, failure);

    // 3. One tensor at a time: writers copy their part to the host and hash it there, every
    // rank joins the collective create and write, and all agree before the next tensor, so a
    // rank whose write failed alone stops every rank at the same place.
    std::vector<std::uint64_t> checksums(n, 0);
    for (std::size_t i = 0; i < n; ++i) {
      const std::string where = prefix + "tensor '" + tensors[i].name + "': ";
      HostFloatView host;
      capture(failure, static_cast<int>(i), where, false, [&] {
        if (tensors[i].writer()) host = gather_parts(tensors[i], checksums[i]);
      });
      capture(failure, static_cast<int>(i), where, false, [&] {
        write_tensor(file, tensors[i], host);
        if (after_write) after_write(i, tensors[i].name);
      });
      agree(comm, failure);
    }

    // 4. Checksums, then MPI_File_sync on every rank (the MPI-IO driver syncs on flush, not on
    // close) and the collective close.
    TRELLIS_MPI(MPI_Allreduce(MPI_IN_PLACE, checksums.data(), static_cast<int>(n), MPI_UINT64_T,
                              MPI_SUM, comm));
    capture(failure, PhaseFailure::kWhole, prefix, false, [&] {
      for (std::size_t i = 0; i < n; ++i) write_checksum(file.datasets[i].get(), checksums[i]);
      TRELLIS_H5(H5Fflush(file.file.get(), H5F_SCOPE_GLOBAL));
      file.datasets.clear();
      file.file.reset();
    });
    agree(comm, failure);
  } catch (...) {
    close_after_failure(file, path, comm);
    throw;
  }
}

}  // namespace trellis
