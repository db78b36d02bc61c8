// Parallel token reads: every rank opens a sharded token stream collectively and reads its
// sampler block of several global batches; the blocks gathered over ranks must equal a
// single-process read of the whole global batch, for independent transfer, collective
// transfer and the in-memory cache, at any rank count.
//
// Only CHECKs (never REQUIRE) after the first collective, so a failing rank still takes part
// in every later collective instead of leaving the others waiting.
#include "catch.hpp"

#include "unit/support/token_helpers.hpp"

#include "trellis/data/token_dataset.hpp"
#include "trellis/data/token_sampler.hpp"

#include <mpi.h>

#include <numeric>

using namespace trellis;
using namespace trellis::testing;

namespace {

struct World {
  int rank = 0, size = 1;
  World() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
  }
};

// Concatenates every rank's `local` (in rank order) on every rank.
template <class T>
std::vector<T> all_gather(const std::vector<T>& local, MPI_Datatype type) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int count = static_cast<int>(local.size());
  std::vector<int> counts(static_cast<std::size_t>(size)), offsets(counts.size(), 0);
  MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  std::partial_sum(counts.begin(), counts.end() - 1, offsets.begin() + 1);
  std::vector<T> all(static_cast<std::size_t>(offsets.back() + counts.back()));
  MPI_Allgatherv(local.data(), count, type, all.data(), counts.data(), offsets.data(), type,
                 MPI_COMM_WORLD);
  return all;
}

std::string test_root() {
  const char* root = std::getenv("TRELLIS_TEST_DATA");
  return root != nullptr && *root != '\0' ? root : "/tmp";
}

}  // namespace

TEST_CASE("ranks read their token windows of a sharded stream", "[token_mpi]") {
  const World world;
  const std::string dir = test_root() + "/token_mpi_np" + std::to_string(world.size);
  const TokenFileSpec spec = token_spec(256);
  // 300 tokens in uneven shards, one empty, with 8-token chunks: windows of 17 tokens cross
  // chunk and shard boundaries, and different ranks' windows touch different shards.
  if (world.rank == 0) {
    fresh_test_dir("token_mpi_np" + std::to_string(world.size));
    write_token_stream(dir + "/train", spec, {120, 0, 97, 83});
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string glob = dir + "/train-*.h5";

  const int seq_len = 16;
  const std::int64_t global_batch = 10, steps = 4;
  const TokenWindowSampler sampler(300, seq_len, global_batch, 2024);
  const int window = sampler.window();

  // Reference: this process alone reads every global batch (closed before the collective
  // opens, so that HDF5 does not share one file between the two communicators).
  std::vector<std::vector<std::int32_t>> expected(steps);
  {
    TokenDataset single = TokenDataset::open(glob, MPI_COMM_SELF);
    std::vector<std::int64_t> global;
    for (std::int64_t step = 0; step < steps; ++step) {
      sampler.global_starts(step, global);
      expected[step].assign(global.size() * window, -1);
      single.read_windows(global, window, expected[step].data());
      CHECK(wrong_tokens(global, window, expected[step], 256) == 0);
    }
  }

  for (int mode = 0; mode < 3; ++mode) {
    INFO("mode " << mode << " (independent, collective, cached)");
    Hdf5Tuning tuning;
    tuning.collective_transfer = mode == 1;
    TokenDataset data = TokenDataset::open(glob, MPI_COMM_WORLD, tuning);
    if (mode == 2) data.cache_in_memory();
    CHECK(data.size() == 300);
    std::vector<std::int64_t> local;
    std::vector<std::int32_t> tokens;
    for (std::int64_t step = 0; step < steps; ++step) {
      const std::int64_t first = sampler.local_starts(step, world.rank, world.size, local);
      CHECK(first == world.rank * global_batch / world.size);
      tokens.assign(local.size() * window, -1);
      data.read_windows(local, window, tokens.data());
      CHECK(all_gather(tokens, MPI_INT32_T) == expected[step]);
    }
  }

  // Evaluation windows split over ranks also gather to the single-process read. 18 windows
  // in batches of 4: the last batch has 2, so at 4 ranks two blocks are empty, and with
  // collective transfer those ranks still join every per-shard read.
  for (bool collective : {false, true}) {
    INFO("evaluation, collective transfer " << collective);
    Hdf5Tuning tuning;
    tuning.collective_transfer = collective;
    TokenDataset data = TokenDataset::open(glob, MPI_COMM_WORLD, tuning);
    const TokenEvalWindows eval(300, seq_len, 4);
    CHECK(eval.window_count() == 18);
    std::vector<std::int64_t> local, global;
    std::vector<std::int32_t> tokens;
    std::int64_t windows = 0;
    for (std::int64_t step = 0; step < eval.steps(); ++step) {
      eval.local_starts(step, world.rank, world.size, local);
      tokens.assign(local.size() * window, -1);
      data.read_windows(local, window, tokens.data());
      eval.global_starts(step, global);
      CHECK(all_gather(local, MPI_INT64_T) == global);
      CHECK(wrong_tokens(global, window, all_gather(tokens, MPI_INT32_T), 256) == 0);
      windows += static_cast<std::int64_t>(global.size());
    }
    CHECK(windows == eval.window_count());
  }

  MPI_Barrier(MPI_COMM_WORLD);
  if (world.rank == 0) std::filesystem::remove_all(dir);
}

TEST_CASE("every rank gets the same InputError for a bad token file", "[token_mpi]") {
  const World world;
  const std::string name = "token_mpi_bad_np" + std::to_string(world.size);
  const std::string path = test_root() + "/" + name + "/val.h5";
  if (world.rank == 0) {
    fresh_test_dir(name);
    TokenFileSpec spec = token_spec(256, "val");
    write_token_range(path, spec, 0, 50);
    edit_file(path, [](hid_t f) { TRELLIS_H5(H5Adelete(f, "split")); });
  }
  MPI_Barrier(MPI_COMM_WORLD);
  int threw = 0;
  try {
    TokenDataset::open(path, MPI_COMM_WORLD);
  } catch (const InputError& e) {
    const std::string message = e.what();
    threw = message.find(path) != std::string::npos && message.find("'split'") != std::string::npos;
  }
  int all_threw = 0;
  MPI_Allreduce(&threw, &all_threw, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  CHECK(all_threw == 1);
  MPI_Barrier(MPI_COMM_WORLD);
  if (world.rank == 0) std::filesystem::remove_all(test_root() + "/" + name);
}
