// Parallel reads: every rank opens a sharded file set collectively and reads its sampler
// block of several global batches; the blocks gathered over ranks must be exactly the
// global batch, in order, with the right contents, for independent and collective transfer.
//
// Only CHECKs (never REQUIRE) after the first collective, so a failing rank still takes part
// in every later collective instead of leaving the others waiting.
#include "catch.hpp"

#include "unit/support/data_helpers.hpp"

#include "trellis/data/sample_dataset.hpp"
#include "trellis/data/sampler.hpp"

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
std::vector<T> all_gather(const std::vector<T>& local, MPI_Datatype type, const World& world) {
  int count = static_cast<int>(local.size());
  std::vector<int> counts(static_cast<std::size_t>(world.size)), offsets(counts.size(), 0);
  MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  std::partial_sum(counts.begin(), counts.end() - 1, offsets.begin() + 1);
  std::vector<T> all(static_cast<std::size_t>(offsets.back() + counts.back()));
  MPI_Allgatherv(local.data(), count, type, all.data(), counts.data(), offsets.data(), type,
                 MPI_COMM_WORLD);
  return all;
}

// Shared data directory: rank 0 writes the shards, everyone waits for it.
std::string make_shared_shards(const World& world, const SampleFileSpec& spec) {
  const std::string name = "data_mpi_np" + std::to_string(world.size);
  std::string dir;
  if (world.rank == 0) {
    dir = fresh_test_dir(name);
    // 100 samples in uneven shards, one empty, so ranks' blocks straddle shard boundaries.
    write_synthetic_shards(dir + "/train", spec, {37, 0, 50, 13});
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const char* root = std::getenv("TRELLIS_TEST_DATA");
  return std::string(root != nullptr && *root != '\0' ? root : "/tmp") + "/" + name;
}

void remove_shared(const World& world, const std::string& dir) {
  MPI_Barrier(MPI_COMM_WORLD);
  if (world.rank == 0) std::filesystem::remove_all(dir);
}

}  // namespace

TEST_CASE("ranks read their sampler blocks of a sharded dataset", "[data_mpi]") {
  const World world;
  SampleFileSpec spec = image_spec();
  spec.sample_shape = {1, 4, 4};
  spec.normalization.mean = {0.25f};
  spec.normalization.std = {0.5f};
  const std::string dir = make_shared_shards(world, spec);

  for (bool collective : {false, true}) {
    INFO("collective transfer: " << collective);
    Hdf5Tuning tuning;
    tuning.collective_transfer = collective;
    SampleDataset data = SampleDataset::open(dir + "/train-*.h5", MPI_COMM_WORLD, tuning);
    CHECK(data.size() == 100);
    CHECK(data.shard_count() == 4);
    const auto numel = static_cast<std::size_t>(data.sample_numel());

    DistributedSampler sampler(data.size(), 24, 2024, true, RemainderPolicy::partial);
    std::vector<int> seen(100, 0);
    LocalBatch local;
    std::vector<float> samples, global_samples;
    std::vector<std::int32_t> labels, global_labels;
    for (std::int64_t epoch = 0; epoch < 2; ++epoch) {
      std::fill(seen.begin(), seen.end(), 0);
      for (std::int64_t step = 0; step < sampler.steps_per_epoch(); ++step) {
        sampler.local_indices(epoch, step, world.rank, world.size, local);
        samples.assign(local.indices.size() * numel, 0.0f);
        labels.assign(local.indices.size(), -1);
        data.read(local.indices, samples.data(), labels.data());

        // Gathered blocks form the global batch, in order.
        const std::vector<std::int64_t> global = sampler.global_batch_indices(epoch, step);
        const std::vector<std::int64_t> gathered_indices =
            all_gather(local.indices, MPI_INT64_T, world);
        CHECK(gathered_indices == global);
        for (std::int64_t i : gathered_indices) ++seen[static_cast<std::size_t>(i)];

        // ...and their contents equal a read of the whole global batch (every rank reads it,
        // which is also a valid collective call) and the generator.
        global_samples.assign(global.size() * numel, 0.0f);
        global_labels.assign(global.size(), -1);
        data.read(global, global_samples.data(), global_labels.data());
        CHECK(all_gather(samples, MPI_FLOAT, world) == global_samples);
        CHECK(all_gather(labels, MPI_INT32_T, world) == global_labels);
        int wrong = 0;
        for (std::size_t p = 0; p < local.indices.size(); ++p) {
          wrong += labels[p] != label_of(local.indices[p], spec.num_classes);
          for (std::size_t e = 0; e < numel; ++e) {
            const double expected =
                expected_value(spec, local.indices[p], static_cast<std::int64_t>(e));
            wrong += std::abs(samples[p * numel + e] - expected) > 1e-5 * (1 + std::abs(expected));
          }
        }
        CHECK(wrong == 0);
      }
      // Every sample exactly once per epoch over all ranks.
      CHECK(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
    }
  }
  remove_shared(world, dir);
}

TEST_CASE("every rank gets the same InputError for a bad data path", "[data_mpi]") {
  const World world;
  const char* root = std::getenv("TRELLIS_TEST_DATA");
  const std::string missing = std::string(root != nullptr ? root : "/tmp") +
                              "/data_mpi_missing_np" + std::to_string(world.size) + "/x-*.h5";
  int threw = 0;
  try {
    SampleDataset::open(missing, MPI_COMM_WORLD);
  } catch (const InputError& e) {
    threw = std::string(e.what()).find(missing) != std::string::npos;
  }
  int all_threw = 0;
  MPI_Allreduce(&threw, &all_threw, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  CHECK(all_threw == 1);
}
