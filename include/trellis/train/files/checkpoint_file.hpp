// Checkpoint files: logical tensors by name in one HDF5 file, written and read by all ranks
// with parallel HDF5 (train/tensor_file.hpp), so a run can resume on any dp x tp x pp layout.
//
// On disk (format "trellis.checkpoint", format_version 2; version 1 files still read):
//   <root>/step-NNNNNNN/state.h5   step zero-padded to 7 digits (more digits past 9,999,999)
//   <root>/latest                  "step-NNNNNNN\n": the checkpoint written last (a hint only:
//                                  list_checkpoints() orders by step, newest first)
// state.h5 root attributes: format, format_version (int32), step (int64), config (the resolved
// INI text), build, one int64 attribute per counter (CheckpointInfo::counters), and (version 2)
// info_checksum (uint64): FNV-1a 64 (offset 0xcbf29ce484222325, prime 0x100000001b3) over
//   for each of step, config, build, then each counter in name order:
//     [u64 name length][name][value: i64 for integers, u64 length + bytes for strings]
// (native little-endian), so a changed step, config or counter is a corrupt checkpoint. Every
// tensor is a contiguous float32 dataset of its LOGICAL shape at its name with a uint64
// attribute "checksum" (train/tensor_piece.hpp).
//
// Durability: the file is written into step-NNNNNNN.tmp/, synced (MPI_File_sync via H5Fflush,
// then fsync by rank 0), published by rename (core/durable_file.hpp), and only then is
// `latest` replaced the same way. A crash at any point leaves the previous checkpoints intact;
// leftovers are "*.tmp" names that list_checkpoints() ignores.
//
// Failure handling: as in train/tensor_file.hpp; every rank throws the same exception, and a
// failed write (a full disk on one rank) removes the .tmp directory and leaves `latest` alone.
#pragma once

#include "trellis/core/kokkos_types.hpp"
#include "trellis/core/shape.hpp"
#include "trellis/data/hdf5_tuning.hpp"
#include "trellis/train/files/tensor_file.hpp"
#include "trellis/train/files/tensor_piece.hpp"

#include <mpi.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace trellis {

inline constexpr const char* kCheckpointFormat = "trellis.checkpoint";
inline constexpr int kCheckpointFormatVersion = 2;
inline constexpr const char* kCheckpointFileName = "state.h5";

struct CheckpointInfo {
  std::int64_t step = 0;
  std::string config_ini;  // root attribute "config"
  std::string build_info;  // root attribute "build"
  // Extra integers, one root attribute each, e.g. "global_batch", "optimizer_steps". Names
  // must not be empty or one of format, format_version, step, config, build, info_checksum.
  std::map<std::string, std::int64_t> counters;
};

// The checksum stored as info_checksum (see above).
std::uint64_t checkpoint_info_checksum(const CheckpointInfo& info);

// "step-0000042" for 42.
std::string checkpoint_dir_name(std::int64_t step);

// Collective over comm. Writes <root>/step-NNNNNNN (see above) with write_tensor_file(): each
// rank passes the tensors it holds; the file gets the union. Rewriting an existing step
// replaces it. Then keeps only the newest `keep` step directories (by step; the one just
// written is always kept; keep <= 0 keeps all). Every rank returns after all of this, with the
// final directory path. after_write: test hook (tensor_file.hpp).
std::string write_checkpoint(const std::string& root, const std::vector<TensorPiece>& pieces,
                             const CheckpointInfo& info, int keep, MPI_Comm comm,
                             const Hdf5Tuning& tuning = Hdf5Tuning{},
                             const TensorWriteHook& after_write = {});

// Step directories under root (full paths), newest step first; `latest` does not change the
// order (resuming takes the newest checkpoint that verifies). "*.tmp" and anything not named
// step-<7 or more digits> are ignored. Empty when root does not exist. Local.
struct CheckpointListing {
  std::vector<std::string> dirs;
  // About `latest` when it is a directory, unreadable, dangling (names no step directory) or
  // names an older step than the newest: for the caller to log.
  std::vector<std::string> warnings;
};
CheckpointListing scan_checkpoints(const std::string& root);
std::vector<std::string> list_checkpoints(const std::string& root);  // scan_checkpoints().dirs

// The root attributes of <dir>/state.h5 (any single rank; serial HDF5). Throws InputError
// naming the file when it is missing, unreadable, not a trellis checkpoint, or when its root
// attributes do not match their info_checksum (version 2).
CheckpointInfo read_checkpoint_info(const std::string& dir);

// Collective over comm: checks the root attributes as read_checkpoint_info does and every
// tensor's checksum (verify_tensor_file). Throws InputError (the same on every rank) naming
// the file and the first bad tensor or attribute.
void verify_checkpoint(const std::string& dir, MPI_Comm comm,
                       const Hdf5Tuning& tuning = Hdf5Tuning{});

// Collective over comm: every rank reads its part of each tensor it passes
// (read_tensor_file). Throws InputError naming the file and the tensor when one is missing,
// has another logical shape or is not float32.
void read_checkpoint(const std::string& dir, const std::vector<TensorPiece>& pieces, MPI_Comm comm,
                     const Hdf5Tuning& tuning = Hdf5Tuning{});

}  // namespace trellis
