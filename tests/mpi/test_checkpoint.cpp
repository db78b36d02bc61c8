// Checkpoint files (train/checkpoint_file.hpp) at any world size: round trips across layouts
// (row, q|k|v, column and middle-dim splits, replicated, scalar and empty tensors), listing /
// `latest` / keep, checksum verification against flipped bits, a truncated file, missing or
// reshaped tensors, and the root attributes. Every error must throw on every rank, never hang.
//
// Only CHECKs (never REQUIRE) after the first collective, so a failing rank still takes part
// in every later collective instead of leaving the others waiting.
#include "catch.hpp"

#include "unit/test_nn_util.hpp"

#include "trellis/core/error.hpp"
#include "trellis/data/hdf5.hpp"
#include "trellis/train/checkpoint_file.hpp"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace trellis;
using trellis::test::to_device;
using trellis::test::to_host;

namespace {

namespace fs = std::filesystem;

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int world_size() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

void barrier() { MPI_Barrier(MPI_COMM_WORLD); }

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
};

template <class F>
Outcome outcome(F&& f) {
  Outcome o;
  try {
    f();
  } catch (const InputError& e) {
    o = {true, true, e.what()};
  } catch (const std::exception& e) {
    o = {true, false, e.what()};
  }
  return o;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Whether every rank holds the same text.
bool same_on_every_rank(const std::string& text) {
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

float value_of(const TestTensor& t, std::uint64_t i) {
  return t.base + 0.25f * static_cast<float>(i);
}

std::vector<TestTensor> test_tensors() {
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
nn::ShardSpec spec_of(const TestTensor& t, Layout layout, int rank, int size, bool* writer) {
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
std::vector<float> expected_piece(const TestTensor& t, const nn::ShardSpec& spec) {
  const kernels::ShardIndexMap map = piece_index_map(t.shape, spec);
  std::vector<float> values(static_cast<std::size_t>(shape_numel(piece_shape(t.shape, spec))));
  for (std::size_t e = 0; e < values.size(); ++e) values[e] = value_of(t, map(e));
  return values;
}

// Pieces of `tensors` in `layout`; filled with the expected values or zeros.
std::vector<TensorPiece> make_pieces(const std::vector<TestTensor>& tensors, Layout layout,
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
void check_read(const std::string& dir, const std::vector<TestTensor>& tensors, Layout layout) {
  std::vector<TensorPiece> pieces = make_pieces(tensors, layout, false);
  const Outcome o = outcome([&] { read_checkpoint(dir, pieces, MPI_COMM_WORLD); });
  CHECK_FALSE(o.threw);
  INFO(o.what);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    INFO(tensors[i].name << " layout " << static_cast<int>(layout) << " rank " << world_rank());
    CHECK(to_host(pieces[i].local) == expected_piece(tensors[i], pieces[i].shard));
  }
}

std::string write_tensors(const std::string& root, const std::vector<TestTensor>& tensors,
                          std::int64_t step, int keep) {
  CheckpointInfo info;
  info.step = step;
  return write_checkpoint(root, make_pieces(tensors, Layout::world, true), info, keep,
                          MPI_COMM_WORLD);
}

std::vector<std::string> names_of(const std::vector<std::string>& paths) {
  std::vector<std::string> names;
  for (const std::string& p : paths) names.push_back(fs::path(p).filename().string());
  return names;
}

// Rank 0: the file offset of a contiguous dataset's first element.
haddr_t dataset_offset(const std::string& file, const std::string& dataset) {
  H5File f(TRELLIS_H5(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)));
  H5Dataset d(TRELLIS_H5(H5Dopen2(f.get(), dataset.c_str(), H5P_DEFAULT)));
  const haddr_t offset = H5Dget_offset(d.get());
  REQUIRE(offset != HADDR_UNDEF);
  return offset;
}

// Rank 0: xors one byte of element `element` of a float32 dataset in the file.
void flip_bit(const std::string& file, const std::string& dataset, std::size_t element) {
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

}  // namespace

TEST_CASE("checkpoint round trip across layouts", "[ckpt_mpi]") {
  ScratchDir scratch("round-trip");
  const std::vector<TestTensor> tensors = test_tensors();
  const std::string dir = write_tensors(scratch.path() + "/", tensors, 12, 0);
  CHECK(dir == scratch.path() + "/step-0000012");
  CHECK(fs::exists(dir + "/state.h5"));
  CHECK_FALSE(fs::exists(dir + ".tmp"));

  check_read(dir, tensors, Layout::world);     // (a) the same split
  check_read(dir, tensors, Layout::whole);     // (b) whole tensors on every rank
  check_read(dir, tensors, Layout::reversed);  // (c) another assignment of pieces to ranks
  const Outcome verified = outcome([&] { verify_checkpoint(dir, MPI_COMM_WORLD); });
  INFO(verified.what);
  CHECK_FALSE(verified.threw);
}

TEST_CASE("ranks holding different tensors (pipeline stages) write and read the union",
          "[ckpt_mpi]") {
  ScratchDir scratch("stages");
  const int rank = world_rank(), size = world_size();
  const int stages = std::min(size, 2), stage = rank % stages;
  const int stage_rank = rank / stages, stage_size = (size - stage + stages - 1) / stages;
  const std::vector<TestTensor> all = test_tensors();
  const TestTensor tied{"params/wte", {6, 4}, 1, 1, 11.0f};  // on every stage
  // Stage s holds the tensors k with k % stages == s (stage 1 in reverse order) and the tied
  // table, which only stage 0 writes; pieces are split over the stage's ranks.
  std::vector<TestTensor> mine;
  for (std::size_t k = 0; k < all.size(); ++k)
    if (static_cast<int>(k) % stages == stage) mine.push_back(all[k]);
  if (stage == 1) std::reverse(mine.begin(), mine.end());
  mine.push_back(tied);
  auto stage_pieces = [&](bool filled) {
    std::vector<TensorPiece> pieces =
        make_pieces(mine, Layout::world, filled, stage_rank, stage_size);
    if (stage != 0) pieces.back().writer = false;
    return pieces;
  };
  CheckpointInfo info;
  info.step = 21;
  const std::string dir =
      write_checkpoint(scratch.path(), stage_pieces(true), info, 0, MPI_COMM_WORLD);

  std::vector<TensorPiece> back = stage_pieces(false);
  const Outcome o = outcome([&] { read_checkpoint(dir, back, MPI_COMM_WORLD); });
  INFO(o.what);
  CHECK_FALSE(o.threw);
  for (std::size_t i = 0; i < mine.size(); ++i) {
    INFO(mine[i].name << " stage " << stage << " rank " << rank);
    CHECK(to_host(back[i].local) == expected_piece(mine[i], back[i].shard));
  }
  std::vector<TestTensor> everything = all;
  everything.push_back(tied);
  check_read(dir, everything, Layout::whole);  // one stage: every tensor on every rank
  const Outcome verified = outcome([&] { verify_checkpoint(dir, MPI_COMM_WORLD); });
  INFO(verified.what);
  CHECK_FALSE(verified.threw);

  // The same, with every rank listing every tensor in one order, other stages' as held = false.
  auto listed_pieces = [&](bool filled) {
    std::vector<TensorPiece> own = stage_pieces(filled), listed;
    for (const TestTensor& t : everything) {
      const auto it = std::find_if(own.begin(), own.end(),
                                   [&](const TensorPiece& p) { return p.name == t.name; });
      if (it != own.end()) {
        listed.push_back(*it);
        continue;
      }
      TensorPiece other;
      other.name = t.name;
      other.logical_shape = t.shape;
      other.held = false;
      listed.push_back(other);
    }
    return listed;
  };
  info.step = 22;
  const std::string dir2 =
      write_checkpoint(scratch.path(), listed_pieces(true), info, 0, MPI_COMM_WORLD);
  std::vector<TensorPiece> listed = listed_pieces(false);
  const Outcome o2 = outcome([&] { read_checkpoint(dir2, listed, MPI_COMM_WORLD); });
  INFO(o2.what);
  CHECK_FALSE(o2.threw);
  for (std::size_t i = 0; i < everything.size(); ++i) {
    if (!listed[i].held) continue;
    INFO(everything[i].name << " stage " << stage << " rank " << rank);
    CHECK(to_host(listed[i].local) == expected_piece(everything[i], listed[i].shard));
  }
  check_read(dir2, everything, Layout::whole);

  // Two ranks that give one name different shapes: an Error on every rank.
  if (size > 1) {
    std::vector<TensorPiece> pieces = make_pieces(all, Layout::whole, false);
    if (rank == 1) {
      pieces[0].logical_shape = {12, 4};
      pieces[0].local = FloatView("other", 48);
    }
    const Outcome bad = outcome([&] { read_checkpoint(dir, pieces, MPI_COMM_WORLD); });
    CHECK(bad.threw);
    CHECK_FALSE(bad.input);
    CHECK(contains(bad.what, "params/fc1.weight"));
    CHECK(contains(bad.what, "different logical shapes"));
    CHECK(same_on_every_rank(bad.what));
  }
}

TEST_CASE("checkpoint writers must cover every tensor once, agreed on every rank", "[ckpt_mpi]") {
  ScratchDir scratch("writers");
  const int rank = world_rank(), size = world_size();
  const std::vector<TestTensor> tensors = test_tensors();

  // A piece of the wrong size on the last rank only: every rank throws, nothing is published.
  std::vector<TensorPiece> pieces = make_pieces(tensors, Layout::world, true);
  if (rank == size - 1) {
    pieces[0].writer = true;
    pieces[0].local = FloatView("short", 3);
  }
  CheckpointInfo info;
  info.step = 3;
  Outcome o = outcome([&] { write_checkpoint(scratch.path(), pieces, info, 0, MPI_COMM_WORLD); });
  CHECK(o.threw);
  CHECK_FALSE(o.input);
  CHECK(contains(o.what, "params/fc1.weight"));
  CHECK(same_on_every_rank(o.what));
  CHECK(list_checkpoints(scratch.path()).empty());

  // Every rank a writer of a replicated tensor (more than one writer when size > 1), or none.
  pieces = make_pieces(tensors, Layout::world, true);
  pieces[4].writer = size > 1;
  o = outcome([&] { write_checkpoint(scratch.path(), pieces, info, 0, MPI_COMM_WORLD); });
  CHECK(o.threw);
  CHECK(contains(o.what, "buffers/bn.running_mean"));
  CHECK(contains(o.what, "exactly one writer"));
  CHECK(same_on_every_rank(o.what));
  CHECK(list_checkpoints(scratch.path()).empty());
}

TEST_CASE("list_checkpoints follows latest, then step; keep prunes", "[ckpt_mpi]") {
  ScratchDir scratch("list");
  const std::string root = scratch.path() + "/checkpoints";
  CHECK(list_checkpoints(root).empty());  // root does not exist yet
  const std::vector<TestTensor> tensors = {{"params/x", {4}, -1, 1, 1.0f}};

  for (std::int64_t step : {1, 2, 3}) write_tensors(root, tensors, step, 0);
  CHECK(names_of(list_checkpoints(root)) ==
        std::vector<std::string>{"step-0000003", "step-0000002", "step-0000001"});

  if (world_rank() == 0) {
    fs::create_directory(root + "/step-0000009.tmp");  // an interrupted write
    fs::create_directory(root + "/other");
    std::ofstream(root + "/notes.txt") << "stray\n";
    std::ofstream(root + "/step-0000008") << "a file, not a directory\n";
  }
  barrier();
  write_tensors(root, tensors, 5, 0);
  write_tensors(root, tensors, 4, 0);  // older step, newer checkpoint: `latest` first
  CHECK(names_of(list_checkpoints(root)) == std::vector<std::string>{"step-0000004", "step-0000005",
                                                                     "step-0000003", "step-0000002",
                                                                     "step-0000001"});
  {
    std::ifstream latest(root + "/latest");
    std::string text((std::istreambuf_iterator<char>(latest)), std::istreambuf_iterator<char>());
    CHECK(text == "step-0000004\n");
  }

  write_tensors(root, tensors, 6, 2);
  CHECK(names_of(list_checkpoints(root)) ==
        std::vector<std::string>{"step-0000006", "step-0000005"});
  CHECK(fs::is_directory(root + "/step-0000009.tmp"));
  CHECK(fs::is_directory(root + "/other"));
  CHECK(fs::exists(root + "/notes.txt"));
  CHECK(fs::exists(root + "/step-0000008"));
  CHECK_FALSE(fs::exists(root + "/latest.tmp"));

  // Rewriting an existing step replaces it and makes it `latest`.
  const std::vector<TestTensor> changed = {{"params/x", {4}, -1, 1, -3.0f}};
  const std::string dir = write_tensors(root, changed, 5, 2);
  CHECK(names_of(list_checkpoints(root)) ==
        std::vector<std::string>{"step-0000005", "step-0000006"});
  CHECK_FALSE(fs::exists(dir + ".old"));
  check_read(dir, changed, Layout::whole);
}

TEST_CASE("verify_checkpoint finds a flipped bit on every rank", "[ckpt_mpi]") {
  ScratchDir scratch("verify");
  const std::vector<TestTensor> tensors = test_tensors();
  const std::string dir = write_tensors(scratch.path(), tensors, 7, 0);
  const std::string file = dir + "/state.h5";
  Outcome o = outcome([&] { verify_checkpoint(dir, MPI_COMM_WORLD); });
  INFO(o.what);
  CHECK_FALSE(o.threw);

  if (world_rank() == 0) flip_bit(file, "params/proj.weight", 5);
  barrier();
  o = outcome([&] { verify_checkpoint(dir, MPI_COMM_WORLD); });
  CHECK(o.input);
  CHECK(contains(o.what, file));
  CHECK(contains(o.what, "params/proj.weight"));
  CHECK(contains(o.what, "checksum mismatch"));
  CHECK(same_on_every_rank(o.what));

  // Two bad tensors: every rank names the first in name order.
  if (world_rank() == 0) flip_bit(file, "params/fc1.weight", 95);
  barrier();
  o = outcome([&] { verify_checkpoint(dir, MPI_COMM_WORLD); });
  CHECK(o.input);
  CHECK(contains(o.what, "params/fc1.weight"));
  CHECK(same_on_every_rank(o.what));

  // A missing checksum attribute.
  const std::string dir2 = write_tensors(scratch.path(), tensors, 8, 0);
  if (world_rank() == 0) {
    H5File f(TRELLIS_H5(H5Fopen((dir2 + "/state.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT)));
    H5Dataset d(TRELLIS_H5(H5Dopen2(f.get(), "optim/scale", H5P_DEFAULT)));
    TRELLIS_H5(H5Adelete(d.get(), "checksum"));
  }
  barrier();
  o = outcome([&] { verify_checkpoint(dir2, MPI_COMM_WORLD); });
  CHECK(o.input);
  CHECK(contains(o.what, "optim/scale"));
  CHECK(contains(o.what, "checksum"));
  CHECK(same_on_every_rank(o.what));
}

TEST_CASE("a truncated checkpoint throws InputError on every rank", "[ckpt_mpi]") {
  ScratchDir scratch("truncated");
  const std::vector<TestTensor> tensors = test_tensors();
  const std::string dir = write_tensors(scratch.path(), tensors, 9, 0);
  const std::string file = dir + "/state.h5";
  if (world_rank() == 0) {
    const auto size = static_cast<off_t>(fs::file_size(file));
    REQUIRE(::truncate(file.c_str(), size / 2) == 0);
  }
  barrier();

  Outcome o = outcome([&] { verify_checkpoint(dir, MPI_COMM_WORLD); });
  CHECK(o.input);
  CHECK(contains(o.what, file));
  CHECK(same_on_every_rank(o.what));

  std::vector<TensorPiece> pieces = make_pieces(tensors, Layout::world, false);
  o = outcome([&] { read_checkpoint(dir, pieces, MPI_COMM_WORLD); });
  CHECK(o.input);
  CHECK(contains(o.what, file));
  CHECK(same_on_every_rank(o.what));

  o = outcome([&] { read_checkpoint_info(dir); });
  CHECK(o.input);
  CHECK(contains(o.what, file));
}

TEST_CASE("read_checkpoint names a missing, reshaped or non-float tensor", "[ckpt_mpi]") {
  ScratchDir scratch("mismatch");
  const std::vector<TestTensor> tensors = test_tensors();
  const std::string dir = write_tensors(scratch.path(), tensors, 10, 0);

  // Reads all good tensors plus (or instead of the one of the same name) a whole `name`.
  auto read_one = [&](const std::string& name, const Shape& shape) {
    std::vector<TensorPiece> pieces = make_pieces(tensors, Layout::world, false);
    pieces.erase(std::remove_if(pieces.begin(), pieces.end(),
                                [&](const TensorPiece& p) { return p.name == name; }),
                 pieces.end());
    TensorPiece extra;
    extra.name = name;
    extra.logical_shape = shape;
    extra.local = FloatView("extra", static_cast<std::size_t>(shape_numel(shape)));
    pieces.insert(pieces.begin() + 2, extra);
    return outcome([&] { read_checkpoint(dir, pieces, MPI_COMM_WORLD); });
  };

  for (const char* missing : {"params/nope", "nothere/at/all", "params"}) {
    const Outcome o = read_one(missing, {3});
    INFO(o.what);
    CHECK(o.input);
    CHECK(contains(o.what, std::string("tensor '") + missing + "'"));
    CHECK(contains(o.what, dir + "/state.h5"));
    CHECK(same_on_every_rank(o.what));
  }
  {
    const Outcome o = read_one("params/fc1.weight", {12, 9});
    INFO(o.what);
    CHECK(o.input);
    CHECK(contains(o.what, "tensor 'params/fc1.weight'"));
    CHECK(contains(o.what, "[12, 9]"));
    CHECK(same_on_every_rank(o.what));
  }
  if (world_rank() == 0) {
    H5File f(TRELLIS_H5(H5Fopen((dir + "/state.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT)));
    const hsize_t n = 3;
    H5Space space(TRELLIS_H5(H5Screate_simple(1, &n, nullptr)));
    H5Dataset d(TRELLIS_H5(H5Dcreate2(f.get(), "params/int_tensor", H5T_STD_I32LE, space.get(),
                                      H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
  }
  barrier();
  {
    const Outcome o = read_one("params/int_tensor", {3});
    INFO(o.what);
    CHECK(o.input);
    CHECK(contains(o.what, "tensor 'params/int_tensor'"));
    CHECK(contains(o.what, "float32"));
    CHECK(same_on_every_rank(o.what));
  }
  // A local piece of the wrong size on one rank: an Error (a bug, not bad input) everywhere.
  {
    std::vector<TensorPiece> pieces = make_pieces(tensors, Layout::world, false);
    if (world_rank() == world_size() - 1) pieces[1].local = FloatView("short", 1);
    const Outcome o = outcome([&] { read_checkpoint(dir, pieces, MPI_COMM_WORLD); });
    CHECK(o.threw);
    CHECK_FALSE(o.input);
    CHECK(contains(o.what, "params/h.0.attn.c_attn.weight"));
    CHECK(same_on_every_rank(o.what));
  }
  // The good tensors still read after all that.
  check_read(dir, tensors, Layout::world);
}

TEST_CASE("CheckpointInfo round-trips through the root attributes", "[ckpt_mpi]") {
  ScratchDir scratch("info");
  CHECK(checkpoint_dir_name(42) == "step-0000042");
  CHECK(checkpoint_dir_name(12345678) == "step-12345678");

  CheckpointInfo info;
  info.step = 1234567;
  info.config_ini = "[model]\nkind = gpt\nname = caf\xc3\xa9\n\n[optim]\nlr = 3e-4\n";
  info.build_info = "trellis 0.1.0 (Release, GNU 12)";
  info.counters = {
      {"global_batch", 256}, {"optimizer_steps", std::int64_t{1} << 40}, {"negative", -5}};
  const std::vector<TestTensor> tensors = {{"params/x", {4}, -1, 1, 1.0f}};
  const std::string dir = write_checkpoint(
      scratch.path(), make_pieces(tensors, Layout::world, true), info, 0, MPI_COMM_WORLD);
  CHECK(dir == scratch.path() + "/step-1234567");

  const Outcome o = outcome([&] {
    const CheckpointInfo back = read_checkpoint_info(dir);
    CHECK(back.step == info.step);
    CHECK(back.config_ini == info.config_ini);
    CHECK(back.build_info == info.build_info);
    CHECK(back.counters == info.counters);
  });
  INFO(o.what);
  CHECK_FALSE(o.threw);

  // Not a checkpoint: a missing directory, a plain HDF5 file.
  Outcome bad = outcome([&] { read_checkpoint_info(scratch.path() + "/nothing"); });
  CHECK(bad.input);
  CHECK(contains(bad.what, scratch.path() + "/nothing/state.h5"));
  if (world_rank() == 0) {
    fs::create_directory(scratch.path() + "/plain");
    H5File f(TRELLIS_H5(H5Fcreate((scratch.path() + "/plain/state.h5").c_str(), H5F_ACC_TRUNC,
                                  H5P_DEFAULT, H5P_DEFAULT)));
  }
  barrier();
  bad = outcome([&] { read_checkpoint_info(scratch.path() + "/plain"); });
  CHECK(bad.input);
  CHECK(contains(bad.what, "not a trellis checkpoint"));
  bad = outcome([&] { verify_checkpoint(scratch.path() + "/plain", MPI_COMM_WORLD); });
  CHECK(bad.input);
  CHECK(contains(bad.what, "not a trellis checkpoint"));
  CHECK(same_on_every_rank(bad.what));
}
