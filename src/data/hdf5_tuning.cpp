#include "trellis/data/hdf5_tuning.hpp"

#include "trellis/comm/mpi_check.hpp"
#include "trellis/core/error.hpp"

namespace trellis {

namespace {

// MPI_Info that frees itself; HDF5 keeps its own duplicate of whatever we pass.
class MpiInfo {
 public:
  MpiInfo() { TRELLIS_MPI(MPI_Info_create(&info_)); }
  MpiInfo(const MpiInfo&) = delete;
  MpiInfo& operator=(const MpiInfo&) = delete;
  ~MpiInfo() { MPI_Info_free(&info_); }
  void set(const std::string& key, const std::string& value) {
    TRELLIS_MPI(MPI_Info_set(info_, key.c_str(), value.c_str()));
  }
  MPI_Info get() const { return info_; }

 private:
  MPI_Info info_ = MPI_INFO_NULL;
};

}  // namespace

void check_tuning(const Hdf5Tuning& tuning) {
  if (tuning.collective_metadata_reads && !tuning.collective_transfer)
    throw ConfigError(
        "HDF5 collective metadata reads need collective transfer: with independent reads, "
        "chunk lookups inside H5Dread would be independent metadata reads");
  if (tuning.posix_reads && tuning.collective_transfer)
    throw ConfigError("HDF5 POSIX reads (data.prefetch > 0) cannot be collective transfers");
}

H5Plist make_parallel_file_access(MPI_Comm comm, const Hdf5Tuning& tuning) {
  H5Plist fapl(TRELLIS_H5(H5Pcreate(H5P_FILE_ACCESS)));
  if (tuning.posix_reads) {
    TRELLIS_H5(H5Pset_fapl_sec2(fapl.get()));
    return fapl;
  }
  MpiInfo info;
  if (tuning.cb_buffer_size > 0) info.set("cb_buffer_size", std::to_string(tuning.cb_buffer_size));
  if (tuning.cb_nodes > 0) info.set("cb_nodes", std::to_string(tuning.cb_nodes));
  for (const auto& [key, value] : tuning.extra_hints) info.set(key, value);
  TRELLIS_H5(H5Pset_fapl_mpio(fapl.get(), comm, info.get()));
  if (tuning.collective_metadata_reads) TRELLIS_H5(H5Pset_all_coll_metadata_ops(fapl.get(), 1));
  return fapl;
}

H5Plist make_dataset_access(const Hdf5Tuning& tuning) {
  H5Plist dapl(TRELLIS_H5(H5Pcreate(H5P_DATASET_ACCESS)));
  // w0 = 0.75 is HDF5's default preemption policy; we never write, so it hardly matters.
  TRELLIS_H5(
      H5Pset_chunk_cache(dapl.get(), tuning.chunk_cache_slots, tuning.chunk_cache_bytes, 0.75));
  return dapl;
}

H5Plist make_transfer(const Hdf5Tuning& tuning) {
  H5Plist dxpl(TRELLIS_H5(H5Pcreate(H5P_DATASET_XFER)));
  if (tuning.posix_reads) return dxpl;  // the sec2 driver takes no MPI-IO transfer mode
  TRELLIS_H5(H5Pset_dxpl_mpio(
      dxpl.get(), tuning.collective_transfer ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT));
  return dxpl;
}

H5Plist make_serial_file_access(const Hdf5Tuning& tuning) {
  H5Plist fapl(TRELLIS_H5(H5Pcreate(H5P_FILE_ACCESS)));
  if (tuning.alignment > 1) {
    TRELLIS_H5(H5Pset_alignment(fapl.get(), tuning.alignment_threshold, tuning.alignment));
  }
  return fapl;
}

}  // namespace trellis
