// The parallel HDF5 tensor file under checkpoints (checkpoint_file.hpp) and model weights
// (weights_file.hpp): every tensor a contiguous float32 dataset of its LOGICAL shape at its
// name (intermediate groups as needed) with a uint64 attribute "checksum" (tensor_piece.hpp),
// written and read by all ranks with the MPI-IO driver.
//
// Failure handling (train/agreement.hpp): each function runs in phases and agrees over comm
// after each one, and after every tensor of a write, so a rank whose collective call failed
// alone (a full disk under the MPI-IO aggregator) never leaves the others in the next
// collective: every rank throws the same error (the first in tensor order, naming the file and
// the tensor). Rank-local checks (piece sizes, ranges) run before any collective HDF5 call.
#pragma once

#include "trellis/data/hdf5_tuning.hpp"
#include "trellis/train/files/tensor_piece.hpp"

#include <hdf5.h>
#include <mpi.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace trellis {

// Test hook: called on every rank right after tensor `index` (file order) was written by the
// collective H5Dwrite; throwing from it acts as that write failing on this rank alone.
using TensorWriteHook = std::function<void(std::size_t index, const std::string& name)>;

// Collective over comm. Creates `path` (truncating), calls write_root(file) on every rank (the
// root attributes: collective metadata calls), creates `groups` (e.g. "params", so that the
// group exists even with no tensor in it), then writes the union of all ranks' tensors: every
// rank takes part in every tensor's collective create and write, with an empty selection
// where it writes nothing. Each writer writes its part with one hyperslab selection (strided
// when shard.sections > 1; a union of at most a few boxes for a range). The file is flushed
// (MPI_File_sync) and closed before returning; the caller makes it durable.
// Costs: per tensor one collective H5Dcreate + H5Dwrite + one MPI_Allreduce (agreement), and on
// writers a device->host copy of one part at a time plus one hashing pass over it.
void write_tensor_file(const std::string& path, const std::vector<TensorPiece>& pieces,
                       const std::function<void(hid_t file)>& write_root,
                       const std::vector<std::string>& groups, MPI_Comm comm,
                       const Hdf5Tuning& tuning = Hdf5Tuning{},
                       const TensorWriteHook& after_write = {});

// Collective over comm: every rank reads its part of each tensor it passes into `local`, with
// collective transfers; ranks may pass different tensors (every rank takes part in the union).
// check_root(file) checks the root attributes (throws InputError without the file name).
// Throws InputError naming the file and the tensor when one is missing, has another logical
// shape or is not float32 (every rank checks the whole union, so all throw the same).
void read_tensor_file(const std::string& path, const std::vector<TensorPiece>& pieces,
                      const std::function<void(hid_t file)>& check_root, MPI_Comm comm,
                      const Hdf5Tuning& tuning = Hdf5Tuning{});

// Collective over comm: recomputes every tensor's checksum from the whole dataset and compares
// it with its attribute. Tensor i of the file (depth-first in name order) is checked by rank
// i % size, with independent reads in blocks of <= 64 MiB: one pass over the file in all.
// Throws InputError (the same on every rank) naming the file and the first bad tensor.
void verify_tensor_file(const std::string& path, const std::function<void(hid_t file)>& check_root,
                        MPI_Comm comm, const Hdf5Tuning& tuning = Hdf5Tuning{});

}  // namespace trellis
