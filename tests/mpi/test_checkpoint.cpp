// Checkpoint files (train/files/checkpoint_file.hpp) at any world size: round trips across layouts
// (row, q|k|v, column and middle-dim splits, replicated, scalar and empty tensors), listing /
// `latest` (a hint; warnings when it dangles) / keep, checksum verification against flipped bits, a
// truncated file, missing or reshaped tensors, and the root attributes. Every error must throw on
// every rank, never hang.
//
// Only CHECKs (never REQUIRE) after the first collective, so a failing rank still takes part
// in every later collective instead of leaving the others waiting.
#include "mpi/checkpoint_helpers.hpp"

using namespace trellis;
using namespace trellis::ckpt_test;

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

TEST_CASE("list_checkpoints orders by step; keep prunes", "[ckpt_mpi]") {
  ScratchDir scratch("list");
  const std::string root = scratch.path() + "/checkpoints";
  CHECK(list_checkpoints(root).empty());  // root does not exist yet
  const std::vector<TestTensor> tensors = {{"params/x", {4}, -1, 1, 1.0f}};

  for (std::int64_t step : {1, 2, 3}) write_tensors(root, tensors, step, 0);
  CHECK(names_of(list_checkpoints(root)) ==
        std::vector<std::string>{"step-0000003", "step-0000002", "step-0000001"});
  CHECK(scan_checkpoints(root).warnings.empty());

  if (world_rank() == 0) {
    fs::create_directory(root + "/step-0000009.tmp");  // an interrupted write
    fs::create_directory(root + "/other");
    std::ofstream(root + "/notes.txt") << "stray\n";
    std::ofstream(root + "/step-0000008") << "a file, not a directory\n";
  }
  barrier();
  write_tensors(root, tensors, 5, 0);
  write_tensors(root, tensors, 4, 0);  // older step, written last: `latest` is only a hint
  CHECK(names_of(list_checkpoints(root)) == std::vector<std::string>{"step-0000005", "step-0000004",
                                                                     "step-0000003", "step-0000002",
                                                                     "step-0000001"});
  {
    std::ifstream latest(root + "/latest");
    std::string text((std::istreambuf_iterator<char>(latest)), std::istreambuf_iterator<char>());
    CHECK(text == "step-0000004\n");
    const std::vector<std::string> warnings = scan_checkpoints(root).warnings;
    REQUIRE(warnings.size() == 1);
    CHECK(contains(warnings[0], "step-0000005 is newer"));
  }

  write_tensors(root, tensors, 6, 2);
  CHECK(names_of(list_checkpoints(root)) ==
        std::vector<std::string>{"step-0000006", "step-0000005"});
  CHECK(fs::is_directory(root + "/step-0000009.tmp"));
  CHECK(fs::is_directory(root + "/other"));
  CHECK(fs::exists(root + "/notes.txt"));
  CHECK(fs::exists(root + "/step-0000008"));
  CHECK_FALSE(fs::exists(root + "/latest.tmp"));

  // Rewriting an existing step replaces it and makes it `latest`; the newest step stays first.
  const std::vector<TestTensor> changed = {{"params/x", {4}, -1, 1, -3.0f}};
  const std::string dir = write_tensors(root, changed, 5, 2);
  CHECK(names_of(list_checkpoints(root)) ==
        std::vector<std::string>{"step-0000006", "step-0000005"});
  CHECK_FALSE(fs::exists(dir + ".old"));
  check_read(dir, changed, Layout::whole);
}

TEST_CASE("a dangling or directory `latest` is ignored with a warning", "[ckpt_mpi]") {
  ScratchDir scratch("latest-warnings");
  const std::string root = scratch.path();
  const std::vector<TestTensor> tensors = {{"params/x", {4}, -1, 1, 1.0f}};
  for (std::int64_t step : {1, 2}) write_tensors(root, tensors, step, 0);
  const std::vector<std::string> newest_first = {"step-0000002", "step-0000001"};

  if (world_rank() == 0) std::ofstream(root + "/latest") << "step-0000007\n";
  barrier();
  CheckpointListing listing = scan_checkpoints(root);
  CHECK(names_of(listing.dirs) == newest_first);
  REQUIRE(listing.warnings.size() == 1);
  CHECK(contains(listing.warnings[0], "dangling"));
  CHECK(contains(listing.warnings[0], root + "/latest"));
  barrier();

  if (world_rank() == 0) {
    fs::remove(root + "/latest");
    fs::create_directory(root + "/latest");
  }
  barrier();
  listing = scan_checkpoints(root);
  CHECK(names_of(listing.dirs) == newest_first);
  REQUIRE(listing.warnings.size() == 1);
  CHECK(contains(listing.warnings[0], "is a directory"));
  barrier();

  // The next checkpoint replaces the directory with a proper `latest`.
  write_tensors(root, tensors, 3, 0);
  CHECK(fs::is_regular_file(root + "/latest"));
  CHECK(scan_checkpoints(root).warnings.empty());
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
