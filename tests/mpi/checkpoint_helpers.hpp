// Helpers of the checkpoint MPI tests (test_checkpoint*.cpp): a scratch directory shared by
// all ranks, outcomes of calls that may throw, and test tensors of known values in several
// layouts.
#pragma once

#include "catch.hpp"

#include "unit/support/nn_helpers.hpp"

#include "trellis/comm/agreement.hpp"
#include "trellis/core/error.hpp"
#include "trellis/data/hdf5.hpp"
#include "trellis/train/files/checkpoint_file.hpp"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace trellis::ckpt_test {

using trellis::test::to_device;
using trellis::test::to_host;

namespace fs = std::filesystem;

inline int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

inline int world_size() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

inline void barrier() { MPI_Barrier(MPI_COMM_WORLD); }

// /tmp/trellis-ckpt-test-<pid of rank 0>/<name>, fresh, shared by all ranks; removed at the end.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name) {
    long pid = world_rank() == 0 ? static_cast<long>(::getpid()) : 0;
    MPI_Bcast(&pid, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    parent_ = "/tmp/trellis-ckpt-test-" + std::to_string(pid);
    path_ = parent_ + "/" + name;
    if (world_rank() == 0) {
      std::error_code ec;
      fs::remove_all(path_, ec);
      fs::create_directories(path_, ec);
    }
    barrier();
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir() {
    barrier();
    if (world_rank() == 0) {
      std::error_code ec;
      fs::remove_all(path_, ec);
      fs::remove(parent_, ec);  // only when empty (the last case)
    }
  }
  const std::string& path() const { return path_; }

 private:
  std::string parent_, path_;
};

// What a call threw on this rank.
struct Outcome {
  bool threw = false;
  bool input = false;  // InputError
  std::string what;
  bool agreed = false;  // AgreedFailure: every rank agreed to stop (run_agreed)
  ExitCode code = ExitCode::ok;
};

template <class F>
inline Outcome outcome(F&& f) {
  Outcome o;
  try {
    f();
  } catch (const InputError& e) {
    o = {true, true, e.what(), false, e.code()};
  } catch (const AgreedFailure& e) {
    o = {true, false, e.what(), true, e.code()};
  } catch (const Error& e) {
    o = {true, false, e.what(), false, e.code()};
  } catch (const std::exception& e) {
    o = {true, false, e.what(), false, ExitCode::failure};
  }
  return o;
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Whether every rank holds the same text.
inline bool same_on_every_rank(const std::string& text) {
  unsigned long long hash = 1469598103934665603ull;
  for (unsigned char c : text) hash = (hash ^ c) * 1099511628211ull;
  unsigned long long mine[2] = {hash, ~hash}, max[2] = {0, 0};
  MPI_Allreduce(mine, max, 2, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  return max[0] == ~max[1];
}

// A test tensor: logical element i holds base + 0.25 i (exact in float32 for these sizes).
struct TestTensor {
  std::string name;
  Shape shape;
  int dim = -1;  // split dim over the world (-1: replicated, written by rank 0)
  int sections = 1;
  float base = 0.0f;
};

inline float value_of(const TestTensor& t, std::uint64_t i) {
  return t.base + 0.25f * static_cast<float>(i);
}

inline std::vector<TestTensor> test_tensors() {
  return {
      {"params/fc1.weight", {12, 8}, 0, 1, 1000.0f},
      {"params/h.0.attn.c_attn.weight", {24, 4}, 0, 3, -2000.0f},  // q|k|v rows
      {"params/proj.weight", {8, 12}, 1, 1, 3000.0f},              // split by columns
      {"params/blocks", {4, 12, 3}, 1, 2, 5000.0f},                // middle dim, 2 sections
      {"buffers/bn.running_mean", {10}, -1, 1, 7.0f},              // replicated
      {"optim/exp_avg/fc1.weight", {12, 8}, 0, 1, 9000.0f},        // deeper groups
      {"optim/scale", {}, -1, 1, 0.5f},                            // a scalar
      {"optim/empty", {0, 4}, 0, 1, 0.0f},                         // no elements
  };
}

enum class Layout { world, reversed, whole };

// This rank's spec of t: the split dim cut into the largest number of parts <= world size that
// divides it; rank r holds piece r % parts (reversed: parts - 1 - r % parts) and writes it when
// r < parts, so ranks beyond `parts` hold copies. Layout::whole: the whole tensor.
// `rank` of `size`: this rank's place in the group that holds the tensor (the world).
inline nn::ShardSpec spec_of(const TestTensor& t, Layout layout, int rank, int size, bool* writer) {
  if (t.dim < 0 || layout == Layout::whole) {
    *writer = rank == 0;
    return nn::ShardSpec{};
  }
  const std::int64_t extent = t.shape[static_cast<std::size_t>(t.dim)] / t.sections;
  int parts = size;
  while (extent % parts != 0) --parts;
  *writer = rank < parts;
  if (parts == 1) return nn::ShardSpec{};
  const int index = layout == Layout::reversed ? parts - 1 - rank % parts : rank % parts;
  return nn::ShardSpec::split(t.dim, parts, index, t.sections);
}

// The expected values of a piece: the logical formula through the piece's index map.
inline std::vector<float> expected_piece(const TestTensor& t, const nn::ShardSpec& spec) {
  const kernels::ShardIndexMap map = spec.index_map(t.shape);
  std::vector<float> values(static_cast<std::size_t>(shape_numel(spec.piece_shape(t.shape))));
  for (std::size_t e = 0; e < values.size(); ++e) values[e] = value_of(t, map(e));
  return values;
}

// Pieces of `tensors` in `layout`; filled with the expected values or zeros.
inline std::vector<TensorPiece> make_pieces(const std::vector<TestTensor>& tensors, Layout layout,
                                            bool filled, int rank = world_rank(),
                                            int size = world_size()) {
  std::vector<TensorPiece> pieces;
  for (const TestTensor& t : tensors) {
    TensorPiece p;
    p.name = t.name;
    p.logical_shape = t.shape;
    p.shard = spec_of(t, layout, rank, size, &p.writer);
    std::vector<float> values = expected_piece(t, p.shard);
    if (!filled) values.assign(values.size(), 0.0f);
    p.local = to_device(t.name, values);
    pieces.push_back(p);
  }
  return pieces;
}

// Reads `tensors` in `layout` and checks every value exactly.
inline void check_read(const std::string& dir, const std::vector<TestTensor>& tensors,
                       Layout layout) {
  std::vector<TensorPiece> pieces = make_pieces(tensors, layout, false);
  const Outcome o = outcome([&] { read_checkpoint(dir, pieces, MPI_COMM_WORLD); });
  CHECK_FALSE(o.threw);
  INFO(o.what);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    INFO(tensors[i].name << " layout " << static_cast<int>(layout) << " rank " << world_rank());
    CHECK(to_host(pieces[i].local) == expected_piece(tensors[i], pieces[i].shard));
  }
}

inline std::string write_tensors(const std::string& root, const std::vector<TestTensor>& tensors,
                                 std::int64_t step, int keep) {
  CheckpointInfo info;
  info.step = step;
  return write_checkpoint(root, make_pieces(tensors, Layout::world, true), info, keep,
                          MPI_COMM_WORLD);
}

inline std::vector<std::string> names_of(const std::vector<std::string>& paths) {
  std::vector<std::string> names;
  for (const std::string& p : paths) names.push_back(fs::path(p).filename().string());
  return names;
}

// Rank 0: the file offset of a contiguous dataset's first element.
inline haddr_t dataset_offset(const std::string& file, const std::string& dataset) {
  H5File f(TRELLIS_H5(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)));
  H5Dataset d(TRELLIS_H5(H5Dopen2(f.get(), dataset.c_str(), H5P_DEFAULT)));
  const haddr_t offset = H5Dget_offset(d.get());
  REQUIRE(offset != HADDR_UNDEF);
  return offset;
}

// Rank 0: xors one byte of element `element` of a float32 dataset in the file.
inline void flip_bit(const std::string& file, const std::string& dataset, std::size_t element) {
  const haddr_t offset = dataset_offset(file, dataset) + 4 * element + 1;
  std::FILE* f = std::fopen(file.c_str(), "r+b");
  REQUIRE(f != nullptr);
  REQUIRE(std::fseek(f, static_cast<long>(offset), SEEK_SET) == 0);
  const int byte = std::fgetc(f);
  REQUIRE(byte != EOF);
  REQUIRE(std::fseek(f, static_cast<long>(offset), SEEK_SET) == 0);
  REQUIRE(std::fputc(byte ^ 0x10, f) != EOF);
  REQUIRE(std::fclose(f) == 0);
}

}  // namespace trellis::ckpt_test
