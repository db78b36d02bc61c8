// Shared by the tensor file writer and reader (tensor_file_write.cpp, tensor_file_read.cpp);
// not part of the public interface.
#pragma once

#include "trellis/data/hdf5.hpp"
#include "trellis/data/hdf5_tuning.hpp"
#include "trellis/train/files/tensor_piece.hpp"

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace trellis::tensor_file {

// One tensor of the file: its name and logical shape, and this rank's parts of it: none, the
// piece (or one range of it), or several disjoint ranges of the piece (ZeRO-1 optimizer state
// of a parameter that spans gradient buckets), in increasing piece order, which is also the
// file's row-major order. The parts' elements, back to back, are this rank's transfer.
struct FileTensor {
  std::string name;
  Shape shape;
  std::vector<const TensorPiece*> parts;

  const TensorPiece* first() const { return parts.empty() ? nullptr : parts.front(); }
  bool writer() const { return !parts.empty() && parts.front()->writer; }
  std::size_t local_count() const;  // elements of all parts
};

// FNV-1a over what every rank must pass alike.
struct LayoutHash {
  std::uint64_t value = 1469598103934665603ull;
  void bytes(const void* data, std::size_t size);
  void integer(std::int64_t v) { bytes(&v, sizeof v); }
  void text(const std::string& s);
};

// Collective: whether every rank computed the same hash.
bool same_on_all_ranks(MPI_Comm comm, std::uint64_t hash);

// Collective: the tensors of the file, the same list on every rank. When every rank passed the
// same names and shapes (dp/tp only), that list in its order; otherwise (pipeline stages hold
// different tensors) the union, sorted by name, gathered (core/tensor_list_codec.hpp) from one
// rank per distinct list. Throws Error on every rank alike when two ranks give one name
// different shapes.
std::vector<FileTensor> file_tensors(const std::vector<TensorPiece>& pieces, MPI_Comm comm);

// Names, shapes, specs and ranges of this rank's pieces (a name may repeat only for disjoint
// ranges of the same piece, all writers or none); the local sizes of those it writes
// (for_writing) or reads (all it holds). Throws Error.
void check_pieces(const std::vector<TensorPiece>& pieces, bool for_writing);

// Dataspace of a logical shape ([]: scalar).
H5Space file_space(const Shape& logical);

// Selects p's part in the file dataspace of p's logical tensor: everything, the piece (one
// strided hyperslab), or a range of it (a union of boxes); nothing when p is nullptr (this
// rank takes part in the transfer without data). The selected elements, in the file's
// row-major order, are the part's elements in order.
void select_part(hid_t space, const TensorPiece* p);
// The union of several parts' selections (FileTensor::parts order = file order).
void select_parts(hid_t space, const std::vector<const TensorPiece*>& parts);

// 1-D memory dataspace of `count` floats (at least one element, so that the buffer pointer may
// be a dummy; nothing selected when count is 0).
H5Space memory_space(std::size_t count);

Shape dataset_shape(hid_t dataset);
void check_float32(hid_t dataset);  // throws InputError

// Opens path on comm with the MPI-IO driver (collective) and runs check_root on it. Throws
// InputError without the file name.
H5File open_parallel(const std::string& path, MPI_Comm comm, const Hdf5Tuning& tuning,
                     const std::function<void(hid_t)>& check_root);

}  // namespace trellis::tensor_file
