// Checkpoint and weights files beyond the basic round trip, at any world size: ZeRO-1 ranges
// of tp pieces (bitwise the whole-tensor file, same checksums, read back by ranges and whole),
// a write failing on one rank mid-file (every rank stops with the same error, no hang, the
// .tmp directory removed, `latest` untouched), root attributes covered by info_checksum, the
// weights file written by every rank, and the one agreement mechanism.
//
// Only CHECKs (never REQUIRE) after the first collective, so a failing rank still takes part
// in every later collective instead of leaving the others waiting.
#include "mpi/checkpoint_helpers.hpp"

#include "trellis/comm/agreement.hpp"
#include "trellis/data/hdf5_attributes.hpp"
#include "trellis/nn/model.hpp"
#include "trellis/nn/parameter_store.hpp"
#include "trellis/train/files/weights_file.hpp"

using namespace trellis;
using namespace trellis::ckpt_test;

namespace {

// Tensors split (tp) with sections, so ranges cross blocks, sections and outer indices.
std::vector<TestTensor> range_tensors() {
  return {
      {"params/qkv.weight", {24, 4}, 0, 3, -2000.0f},  // q|k|v rows
      {"params/blocks", {4, 16, 3}, 1, 2, 5000.0f},    // middle dim, 2 sections
      {"optim/deep", {2, 3, 12, 2}, 2, 3, 9000.0f},    // two outer dims, 3 sections
      {"optim/plain", {5, 7}, -1, 1, 11.0f},           // not sharded: a range of it
  };
}

// This rank's part of t with tp ranks splitting the tensor and dp ranks splitting each piece
// into ranges (rank = dp_index * tp + tp_index); interior range bounds are moved by one element
// so that ranges start and end inside blocks.
TensorPiece range_piece(const TestTensor& t, int tp, int dp, bool filled) {
  const int rank = world_rank();
  TensorPiece p;
  p.name = t.name;
  p.logical_shape = t.shape;
  if (t.dim >= 0 && tp > 1) p.shard = nn::ShardSpec::split(t.dim, tp, rank % tp, t.sections);
  // A tensor the tp ranks do not split is split into ranges over every rank.
  const bool split = p.shard.sharded();
  const auto k = static_cast<std::size_t>(split ? rank / tp : rank);
  const auto ranges = static_cast<std::size_t>(split ? dp : tp * dp);
  const std::size_t numel = p.piece_numel();
  auto bound = [&](std::size_t i) {
    const std::size_t b = i * numel / ranges;
    return i > 0 && i < ranges ? b + 1 : b;
  };
  p.range_begin = bound(k);
  p.range_end = bound(k + 1);
  p.writer = true;
  const kernels::ShardIndexMap map = p.shard.index_map(t.shape);
  std::vector<float> values(p.range_end - p.range_begin, 0.0f);
  if (filled)
    for (std::size_t e = 0; e < values.size(); ++e) values[e] = value_of(t, map(p.range_begin + e));
  p.local = to_device(t.name, values);
  return p;
}

// Rank 0: the dataset's values and checksum attribute.
std::pair<std::vector<float>, std::uint64_t> dataset_of(const std::string& file,
                                                        const std::string& name) {
  H5File f(TRELLIS_H5(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)));
  H5Dataset d(TRELLIS_H5(H5Dopen2(f.get(), name.c_str(), H5P_DEFAULT)));
  H5Space space(TRELLIS_H5(H5Dget_space(d.get())));
  std::vector<float> values(static_cast<std::size_t>(H5Sget_simple_extent_npoints(space.get())));
  TRELLIS_H5(H5Dread(d.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()));
  H5Attribute a(TRELLIS_H5(H5Aopen(d.get(), "checksum", H5P_DEFAULT)));
  std::uint64_t checksum = 0;
  TRELLIS_H5(H5Aread(a.get(), H5T_NATIVE_UINT64, &checksum));
  return {values, checksum};
}

}  // namespace

TEST_CASE("ZeRO-1 ranges of tp pieces write and read like whole tensors", "[ckpt_mpi]") {
  ScratchDir scratch("ranges");
  const int size = world_size();
  const std::vector<TestTensor> tensors = range_tensors();
  CheckpointInfo info;
  info.step = 1;
  const std::string whole =
      write_checkpoint(scratch.path() + "/whole", make_pieces(tensors, Layout::whole, true), info,
                       0, MPI_COMM_WORLD);

  for (int tp : {1, 2, 4}) {
    if (size % tp != 0) continue;
    const int dp = size / tp;
    INFO("tp " << tp << " dp " << dp << " rank " << world_rank());
    std::vector<TensorPiece> pieces;
    for (const TestTensor& t : tensors) pieces.push_back(range_piece(t, tp, dp, true));
    const std::string root = scratch.path() + "/tp" + std::to_string(tp);
    Outcome o = outcome([&] { write_checkpoint(root, pieces, info, 0, MPI_COMM_WORLD); });
    INFO(o.what);
    CHECK_FALSE(o.threw);
    const std::string dir = root + "/step-0000001";
    if (world_rank() == 0)
      for (const TestTensor& t : tensors) {
        INFO(t.name);
        const auto [values, checksum] = dataset_of(dir + "/state.h5", t.name);
        const auto [expected, expected_checksum] = dataset_of(whole + "/state.h5", t.name);
        CHECK(values == expected);  // bitwise
        CHECK(checksum == expected_checksum);
      }
    o = outcome([&] { verify_checkpoint(dir, MPI_COMM_WORLD); });
    CHECK_FALSE(o.threw);

    // Read back by the same ranges, and whole.
    std::vector<TensorPiece> back;
    for (const TestTensor& t : tensors) back.push_back(range_piece(t, tp, dp, false));
    o = outcome([&] { read_checkpoint(dir, back, MPI_COMM_WORLD); });
    CHECK_FALSE(o.threw);
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      INFO(tensors[i].name);
      CHECK(to_host(back[i].local) == to_host(range_piece(tensors[i], tp, dp, true).local));
    }
    check_read(dir, tensors, Layout::whole);
  }

  // Ranges that overlap (or leave a gap) do not add up: an error on every rank.
  std::vector<TensorPiece> pieces = make_pieces(tensors, Layout::whole, true);
  if (world_rank() == 0) {
    pieces[3].range_begin = 1;
    pieces[3].local = FloatView("short", 34);
  }
  const Outcome o =
      outcome([&] { write_checkpoint(scratch.path() + "/gap", pieces, info, 0, MPI_COMM_WORLD); });
  CHECK(o.threw);
  CHECK(contains(o.what, "optim/plain"));
  CHECK(same_on_every_rank(o.what));
}

TEST_CASE("a write failing on one rank stops every rank with one error, no hang", "[ckpt_mpi]") {
  ScratchDir scratch("write-failure");
  const std::string root = scratch.path();
  const std::vector<TestTensor> tensors = test_tensors();
  write_tensors(root, tensors, 1, 0);
  const int failing = world_size() - 1;  // not rank 0, which publishes, when size > 1

  CheckpointInfo info;
  info.step = 2;
  // The collective write of tensor 2 "fails" on one rank only (as ENOSPC under one MPI-IO
  // aggregator does); before the fix that rank left the loop and the others waited in the
  // next collective H5Dcreate forever.
  const TensorWriteHook hook = [&](std::size_t index, const std::string& name) {
    if (index == 2 && world_rank() == failing)
      throw Error("injected write failure of '" + name + "' (expected in this test)");
  };
  const Outcome o = outcome([&] {
    write_checkpoint(root, make_pieces(tensors, Layout::world, true), info, 0, MPI_COMM_WORLD,
                     Hdf5Tuning{}, hook);
  });
  CHECK(o.threw);
  CHECK(contains(o.what, "injected write failure"));
  CHECK(contains(o.what, root + "/step-0000002.tmp/state.h5"));
  CHECK(contains(o.what, tensors[2].name));
  CHECK(same_on_every_rank(o.what));
  barrier();
  CHECK_FALSE(fs::exists(root + "/step-0000002.tmp"));
  CHECK_FALSE(fs::exists(root + "/step-0000002"));
  std::ifstream latest(root + "/latest");
  std::string text((std::istreambuf_iterator<char>(latest)), std::istreambuf_iterator<char>());
  CHECK(text == "step-0000001\n");
  CHECK(names_of(list_checkpoints(root)) == std::vector<std::string>{"step-0000001"});

  // The job goes on: the next checkpoint writes normally.
  const Outcome next = outcome([&] { write_tensors(root, tensors, 3, 0); });
  INFO(next.what);
  CHECK_FALSE(next.threw);
  check_read(root + "/step-0000003", tensors, Layout::world);
}

TEST_CASE("a changed root attribute makes the checkpoint corrupt", "[ckpt_mpi]") {
  ScratchDir scratch("info-checksum");
  const std::vector<TestTensor> tensors = {{"params/x", {4}, -1, 1, 1.0f}};
  CheckpointInfo info;
  info.step = 20;
  info.config_ini = "[train]\nseed = 1\n";
  info.counters["optimizer_steps"] = 20;
  const std::string dir = write_checkpoint(
      scratch.path(), make_pieces(tensors, Layout::world, true), info, 0, MPI_COMM_WORLD);
  const std::string file = dir + "/state.h5";
  auto edit = [&](const std::function<void(hid_t)>& change) {
    barrier();  // no rank has the file open (HDF5 file locks)
    if (world_rank() == 0) {
      H5File f(TRELLIS_H5(H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)));
      change(f.get());
    }
    barrier();
  };
  auto set_i64 = [](hid_t f, const char* name, std::int64_t value) {
    TRELLIS_H5(H5Adelete(f, name));
    H5Space space(TRELLIS_H5(H5Screate(H5S_SCALAR)));
    H5Attribute a(
        TRELLIS_H5(H5Acreate2(f, name, H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT)));
    TRELLIS_H5(H5Awrite(a.get(), H5T_NATIVE_INT64, &value));
  };

  edit([&](hid_t f) { set_i64(f, "step", 999); });
  Outcome o = outcome([&] { read_checkpoint_info(dir); });
  CHECK(o.input);
  CHECK(contains(o.what, file));
  CHECK(contains(o.what, "info_checksum"));
  o = outcome([&] { verify_checkpoint(dir, MPI_COMM_WORLD); });
  CHECK(o.input);
  CHECK(contains(o.what, "info_checksum"));
  CHECK(same_on_every_rank(o.what));

  edit([&](hid_t f) {
    set_i64(f, "step", 20);
    write_string_attribute(f, "config", "[train]\nseed = 2\n");
  });
  o = outcome([&] { read_checkpoint_info(dir); });
  CHECK(o.input);
  CHECK(contains(o.what, "info_checksum"));

  // A format_version 1 file (no info_checksum) still reads.
  edit([&](hid_t f) {
    write_string_attribute(f, "config", info.config_ini);
    write_int_attribute(f, "format_version", 1);
    TRELLIS_H5(H5Adelete(f, "info_checksum"));
  });
  o = outcome([&] {
    const CheckpointInfo back = read_checkpoint_info(dir);
    CHECK(back.step == 20);
    CHECK(back.counters == info.counters);
  });
  INFO(o.what);
  CHECK_FALSE(o.threw);
  o = outcome([&] { verify_checkpoint(dir, MPI_COMM_WORLD); });
  CHECK_FALSE(o.threw);
  // A version 2 file without it is corrupt; a future version is refused.
  edit([&](hid_t f) { write_int_attribute(f, "format_version", 2); });
  o = outcome([&] { read_checkpoint_info(dir); });
  CHECK(o.input);
  CHECK(contains(o.what, "'info_checksum' is missing"));
  edit([&](hid_t f) { write_int_attribute(f, "format_version", 3); });
  o = outcome([&] { read_checkpoint_info(dir); });
  CHECK(o.input);
  CHECK(contains(o.what, "'format_version'"));
  CHECK(contains(o.what, "found 3"));
}

TEST_CASE("the weights file is written by every rank and loads", "[ckpt_mpi]") {
  ScratchDir scratch("weights");
  const std::string path = scratch.path() + "/model.h5";
  // fc.weight [6, 4] split by rows over the world where it divides, a 1-D buffer on rank 0.
  const TestTensor weight{"params/fc.weight", {6, 4}, 0, 1, 3.0f};
  const TestTensor buffer{"buffers/bn.running_mean", {4}, -1, 1, -1.0f};
  std::vector<TensorPiece> pieces = make_pieces({weight, buffer}, Layout::world, true);
  Outcome o =
      outcome([&] { write_weights_file(path, pieces, "[model]\nkind = mlp\n", MPI_COMM_WORLD); });
  INFO(o.what);
  CHECK_FALSE(o.threw);
  CHECK_FALSE(fs::exists(path + ".tmp"));

  o = outcome([&] {
    CHECK(read_weights_config(path) == "[model]\nkind = mlp\n");
    nn::ParameterStore store;
    store.add("fc.weight", {6, 4}, nn::InitSpec::zeros(), false);
    store.finalize(0);
    FloatView running("bn", 4);
    load_weights(path, store,
                 {nn::NamedBuffer{"bn.running_mean", kernels::Vector(running.data(), 4)}});
    CHECK(to_host(store.param(0)) == expected_piece(weight, nn::ShardSpec{}));
    CHECK(to_host(running) == expected_piece(buffer, nn::ShardSpec{}));
    H5File f(TRELLIS_H5(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)));
    CHECK(read_string_attribute(f.get(), "format") == "trellis.weights");
    CHECK(read_int_attribute(f.get(), "format_version") == 1);
  });
  INFO(o.what);
  CHECK_FALSE(o.threw);

  // Not a weights file: a checkpoint.
  CheckpointInfo info;
  const std::string dir = write_checkpoint(scratch.path(), pieces, info, 0, MPI_COMM_WORLD);
  o = outcome([&] { read_weights_config(dir + "/state.h5"); });
  CHECK(o.input);
  CHECK(contains(o.what, "\"trellis.weights\""));
  CHECK(contains(o.what, "found \"trellis.checkpoint\""));
}

TEST_CASE("agreement: every rank throws the winning error", "[ckpt_mpi]") {
  const int size = world_size(), last = size - 1;
  // Ordered items: the lowest order wins whatever the rank.
  PhaseFailure failure;
  capture(failure, 5, "tensor 5: ", false, [&] {
    if (world_rank() == last) throw Error("late");
  });
  capture(failure, 3, "tensor 3: ", true, [&] {
    if (world_rank() == 0) throw Error("early");
  });
  Outcome o = outcome([&] { agree(MPI_COMM_WORLD, failure); });
  CHECK(o.input);  // as_input made it bad input
  CHECK(o.what == "tensor 3: early");

  // run_agreed: at one order, the highest exit code wins; every rank gets AgreedFailure.
  const Logger quiet(world_rank() + 1000);  // not rank 0: prints nothing but errors
  ExitCode code = ExitCode::ok;
  std::string message;
  try {
    run_agreed(MPI_COMM_WORLD, quiet, [&] {
      if (world_rank() == last) throw InputError("bad input on the last rank (expected)");
      if (world_rank() == 0 && size > 1) throw Error("plain failure on rank 0 (expected)");
    });
  } catch (const AgreedFailure& e) {
    code = e.code();
    message = e.what();
  }
  CHECK(code == ExitCode::bad_input);
  CHECK(message == "bad input on the last rank (expected)");
  CHECK_NOTHROW(run_agreed(MPI_COMM_WORLD, quiet, [] {}));
}
