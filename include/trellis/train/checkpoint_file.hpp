// Checkpoint files: logical tensors by name in one HDF5 file, written and read by all ranks
// with parallel HDF5 (MPI-IO driver), so a run can resume on any dp x tp x pp layout.
//
// On disk (format "trellis.checkpoint", format_version 1):
//   <root>/step-NNNNNNN/state.h5   step zero-padded to 7 digits (more digits past 9,999,999)
//   <root>/latest                  "step-NNNNNNN\n": the newest complete checkpoint
// state.h5 root attributes: format, format_version (int32), step (int64), config (the resolved
// INI text), build, and one int64 attribute per counter (CheckpointInfo::counters). Every
// tensor is a contiguous float32 dataset of its LOGICAL shape at its name (intermediate groups
// as needed) with a uint64 attribute "checksum".
//
// Checksum: additive and keyed by position, so every writer hashes only its own piece and the
// pieces are summed with MPI_Allreduce:
//   checksum = sum over logical (row-major) element indices i of
//              checkpoint_mix(i, bits(value_i))  (mod 2^64)
//   checkpoint_mix(i, b) = splitmix64(i * 0x9E3779B97F4A7C15 ^ b), where (all mod 2^64)
//   splitmix64(x): z = x + 0x9E3779B97F4A7C15; z = (z ^ z >> 30) * 0xBF58476D1CE4E5B9;
//                  z = (z ^ z >> 27) * 0x94D049BB133111EB; return z ^ z >> 31
// bits() is the IEEE float32 bit pattern (as stored, little-endian). For a fixed i the map
// b -> mix is a bijection, so changing any bits of one element always changes the checksum; a
// piece written to the wrong place almost surely changes it too (the index is in every term).
// It is not a cryptographic hash. (Checked against an independent Python implementation.)
//
// Durability: the file is written into step-NNNNNNN.tmp/, synced (MPI_File_sync via H5Fflush,
// then fsync by rank 0), renamed to step-NNNNNNN, and only then is `latest` replaced
// (write latest.tmp, fsync, rename, fsync the directory). A crash at any point leaves the
// previous `latest` intact; leftovers are "*.tmp" names that list_checkpoints() ignores.
//
// Failure handling ("every rank agrees before anyone acts"): each function runs in phases and
// reduces an error flag over comm after each one; when any rank failed, every rank throws the
// same exception (the first error in tensor order, its message broadcast from the rank that
// saw it). Rank-local checks (piece sizes, layouts) run before any collective HDF5 call.
// Errors inside collective HDF5 calls (create, open, close, collective transfers) are assumed
// to hit every rank alike, as they do for a file every rank sees (missing, truncated, full
// disk); a rank that fails alone inside one may still leave the others waiting.
#pragma once

#include "trellis/core/kokkos_types.hpp"
#include "trellis/core/shape.hpp"
#include "trellis/data/hdf5_tuning.hpp"
#include "trellis/kernels/random_fill.hpp"
#include "trellis/nn/parameter_store.hpp"

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace trellis {

inline constexpr const char* kCheckpointFormat = "trellis.checkpoint";
inline constexpr int kCheckpointFormatVersion = 1;
inline constexpr const char* kCheckpointFileName = "state.h5";

// One logical tensor and this rank's piece of it.
struct TensorPiece {
  std::string name;     // dataset path in the file, e.g. "params/fc1.weight", "optim/exp_avg/x"
  Shape logical_shape;  // the whole tensor's shape ([] = a scalar)
  nn::ShardSpec shard;  // how `local` maps into the logical tensor; !sharded(): the whole tensor
  bool writer = false;  // write_checkpoint: whether this rank writes its piece. The caller makes
                        // exactly one writer per distinct piece (checked: the writers' pieces
                        // must add up to the tensor's element count)
  FloatView local;      // [numel of the piece], row-major [outer, sections, piece, inner];
                        // written from (writers) / read into (every rank that holds it)
  bool held = true;     // false: this rank holds no piece (another pipeline stage's tensor): it
                        // only takes part in the collective calls; writer must be false and
                        // `local` is not used. Optional: a rank may also leave such tensors out
                        // of its list (the file gets the union of all ranks' lists).
};

struct CheckpointInfo {
  std::int64_t step = 0;
  std::string config_ini;  // root attribute "config"
  std::string build_info;  // root attribute "build"
  // Extra integers, one root attribute each, e.g. "global_batch", "optimizer_steps". Names
  // must not be empty or one of format, format_version, step, config, build.
  std::map<std::string, std::int64_t> counters;
};

// "step-0000042" for 42.
std::string checkpoint_dir_name(std::int64_t step);

// Collective over comm. Writes <root>/step-NNNNNNN (see above). Each rank passes the tensors
// it holds (pipeline stages hold different ones; ranks that hold a piece without writing it
// pass it with writer = false); the file gets the union of all ranks' tensors, and every rank
// takes part in every tensor's collective create and write, with an empty selection where it
// writes nothing. Each writer writes its piece with one hyperslab selection (strided when
// shard.sections > 1). Rewriting an existing step replaces it. Then keeps only the newest
// `keep` step directories in list_checkpoints() order (the one just written is first;
// keep <= 0 keeps all). Every rank returns after all of this, with the final directory path.
// Costs: per tensor one collective H5Dcreate + H5Dwrite + checksum attribute, and on writers a
// device->host copy of one piece at a time (host memory: the largest piece) plus one hashing
// pass over it; three small MPI_Allreduce/Allgather calls in all, plus one MPI_Allgatherv of
// the distinct tensor lists when the ranks' lists differ; the fsyncs and renames on rank 0.
std::string write_checkpoint(const std::string& root, const std::vector<TensorPiece>& pieces,
                             const CheckpointInfo& info, int keep, MPI_Comm comm,
                             const Hdf5Tuning& tuning = Hdf5Tuning{});

// Step directories under root (full paths), newest first: the target of `latest` (when it
// names an existing step directory), then the others by step, descending. "*.tmp" and anything
// not named step-<7 or more digits> are ignored. Empty when root does not exist. Local.
std::vector<std::string> list_checkpoints(const std::string& root);

// The root attributes of <dir>/state.h5 (any single rank; serial HDF5). Throws InputError
// naming the file when it is missing, unreadable or not a trellis checkpoint.
CheckpointInfo read_checkpoint_info(const std::string& dir);

// Collective over comm: recomputes every tensor's checksum from the whole dataset and compares
// it with its attribute. Tensor i of the file (depth-first in name order) is checked by rank
// i % size, with independent reads in blocks of <= 64 MiB: one pass over the file in all.
// Throws InputError (the same on every rank) naming the file and the first bad tensor:
// checksum mismatch, missing checksum, unreadable data; or naming the file when it is
// truncated, unreadable or not a trellis checkpoint.
void verify_checkpoint(const std::string& dir, MPI_Comm comm,
                       const Hdf5Tuning& tuning = Hdf5Tuning{});

// Collective over comm: every rank reads its piece of each tensor it passes (the hyperslab
// of its ShardSpec; !sharded(): the whole tensor) into `local`, with collective transfers; as
// in write_checkpoint, ranks may pass different tensors (every rank takes part in the union).
// Throws InputError naming the file and the tensor when one is missing, has another logical
// shape or is not float32 (every rank checks the whole union, so all throw the same).
void read_checkpoint(const std::string& dir, const std::vector<TensorPiece>& pieces, MPI_Comm comm,
                     const Hdf5Tuning& tuning = Hdf5Tuning{});

// ---- helpers, exposed for tests and for callers that hash or map pieces themselves --------

// splitmix64(index * 0x9E3779B97F4A7C15 ^ bits): one term of the checksum.
inline std::uint64_t checkpoint_mix(std::uint64_t index, std::uint32_t bits) {
  std::uint64_t z = (index * 0x9E3779B97F4A7C15ull ^ bits) + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Sum of checkpoint_mix(map(e), bits(values[e])) over e < count (mod 2^64).
std::uint64_t checkpoint_checksum(const float* values, std::size_t count,
                                  const kernels::ShardIndexMap& map = {});

// The piece's shape (logical shape with dim divided by parts) and its element -> logical
// element map, as ParameterStore holds shards. Throw Error for an invalid spec.
Shape piece_shape(const Shape& logical_shape, const nn::ShardSpec& shard);
kernels::ShardIndexMap piece_index_map(const Shape& logical_shape, const nn::ShardSpec& shard);

}  // namespace trellis
