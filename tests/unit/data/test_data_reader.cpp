// SampleDataset reads: arbitrary index lists over several shards, normalisation, dtypes.
#include "catch.hpp"

#include "unit/support/data_helpers.hpp"

#include "trellis/data/read_plan.hpp"
#include "trellis/data/sample_dataset.hpp"

#include <numeric>

using namespace trellis;
using namespace trellis::testing;

namespace {

// Reads `indices` and checks every value and label against the synthetic generator.
void check_read(SampleDataset& data, const SampleFileSpec& spec,
                const std::vector<std::int64_t>& indices) {
  const std::int64_t numel = data.sample_numel();
  std::vector<float> out(indices.size() * static_cast<std::size_t>(numel), -99.0f);  // [n, numel]
  std::vector<std::int32_t> labels(indices.size(), -1);                              // [n]
  data.read(indices, out.data(), labels.data());
  int wrong_values = 0, wrong_labels = 0;
  for (std::size_t p = 0; p < indices.size(); ++p) {
    if (labels[p] != label_of(indices[p], spec.num_classes)) ++wrong_labels;
    for (std::int64_t e = 0; e < numel; ++e) {
      const double expected = expected_value(spec, indices[p], e);
      const double got = out[p * static_cast<std::size_t>(numel) + static_cast<std::size_t>(e)];
      if (std::abs(got - expected) > 1e-5 * (1.0 + std::abs(expected))) ++wrong_values;
    }
  }
  CHECK(wrong_labels == 0);
  CHECK(wrong_values == 0);
}

}  // namespace

TEST_CASE("read plan sorts, merges runs per shard and maps positions to slots", "[data]") {
  ReadPlan plan;
  // Shards [0,4), [4,4) (empty), [4,10).
  plan.build({5, 3, 4, 4, 9, 0}, {0, 4, 4, 10});
  // Unique sorted rows 0 3 | 4 5 9: rows 3 and 4 are consecutive but in different shards.
  REQUIRE(plan.unique_rows() == 5);
  REQUIRE(plan.runs().size() == 4);
  CHECK(plan.runs()[0].first_row == 0);
  CHECK(plan.runs()[0].rows == 1);
  CHECK(plan.runs()[1].first_row == 3);
  CHECK(plan.runs()[2].first_row == 0);  // global 4 = row 0 of the third shard
  CHECK(plan.runs()[2].rows == 2);
  CHECK(plan.runs()[3].first_row == 5);
  CHECK(plan.run_begin(0) == 0);
  CHECK(plan.run_begin(1) == 2);
  CHECK(plan.run_begin(2) == 2);
  CHECK(plan.run_begin(3) == 4);
  CHECK(plan.slot_begin(1) == 2);
  CHECK(plan.slot_begin(2) == 2);
  CHECK(plan.slot_begin(3) == 5);
  CHECK(plan.slot_of() == std::vector<std::int64_t>{3, 1, 2, 2, 4, 0});

  plan.build({}, {0, 4, 4, 10});
  CHECK(plan.unique_rows() == 0);
  CHECK(plan.runs().empty());
  CHECK(plan.run_begin(3) == 0);

  CHECK_THROWS_AS(plan.build({10}, {0, 4, 4, 10}), Error);
  CHECK_THROWS_AS(plan.build({-1}, {0, 4, 4, 10}), Error);
}

TEST_CASE("sharded uint8 dataset: arbitrary index lists read back normalised", "[data]") {
  const std::string dir = fresh_test_dir("data_reader_u8");
  const SampleFileSpec spec = image_spec();
  // Uneven shards, one of them empty: runs cross shard and chunk (4-row) boundaries.
  const std::string glob = write_synthetic_shards(dir + "/train", spec, {5, 0, 7, 4});
  std::vector<std::int64_t> reversed(16);
  std::iota(reversed.rbegin(), reversed.rend(), std::int64_t{0});

  for (int mode = 0; mode < 3; ++mode) {
    const bool one_read_per_shard = mode == 1, in_memory = mode == 2;
    INFO("one_read_per_shard " << one_read_per_shard << ", cached in memory " << in_memory);
    Hdf5Tuning tuning;
    tuning.one_read_per_shard = one_read_per_shard;
    SampleDataset data = SampleDataset::open(glob, MPI_COMM_SELF, tuning);
    CHECK(!data.cached());
    if (in_memory) data.cache_in_memory();
    CHECK(data.cached() == in_memory);
    CHECK(data.size() == 16);
    CHECK(data.shard_count() == 4);
    CHECK(data.shard_path(2) == shard_file_name(dir + "/train", 2, 4));
    CHECK(data.sample_shape() == Shape{2, 3, 2});
    CHECK(data.sample_numel() == 12);
    CHECK(data.num_classes() == 7);
    CHECK(data.sample_dtype() == SampleDType::u8);
    CHECK(data.normalization() == spec.normalization);
    CHECK(data.source() == "synthetic");

    check_read(data, spec, {15, 0, 4, 5, 6, 4, 11, 12, 3, 3});      // unsorted, duplicates
    check_read(data, spec, {3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13});  // one run over all shards
    check_read(data, spec, reversed);
    check_read(data, spec, reversed);  // scratch reuse
    check_read(data, spec, {7});
    check_read(data, spec, {});

    std::vector<float> out(12);
    std::vector<std::int32_t> labels(1);
    CHECK_THROWS_AS(data.read({16}, out.data(), labels.data()), Error);
  }
}

TEST_CASE("float32 [N, D] samples with uint8 labels, listed files concatenate", "[data]") {
  const std::string dir = fresh_test_dir("data_reader_f32");
  SampleFileSpec spec;
  spec.sample_shape = {5};
  spec.dtype = SampleDType::f32;
  spec.num_classes = 3;
  spec.normalization.scale = 2.0f;
  spec.normalization.mean = {1.5f};
  spec.normalization.std = {4.0f};
  write_synthetic(dir + "/a.h5", spec, 0, 6);
  write_synthetic(dir + "/b.h5", spec, 6, 3);
  // Store b's labels as uint8, which the format also accepts.
  edit_file(dir + "/b.h5", [&](hid_t file) {
    replace_dataset(file, "labels", H5T_STD_U8LE, {3});
    H5Dataset labels(TRELLIS_H5(H5Dopen2(file, "labels", H5P_DEFAULT)));
    const std::uint8_t values[3] = {static_cast<std::uint8_t>(label_of(6, 3)),
                                    static_cast<std::uint8_t>(label_of(7, 3)),
                                    static_cast<std::uint8_t>(label_of(8, 3))};
    TRELLIS_H5(H5Dwrite(labels.get(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, values));
  });

  SampleDataset data = SampleDataset::open({dir + "/a.h5", dir + "/b.h5"}, MPI_COMM_SELF);
  CHECK(data.size() == 9);
  CHECK(data.sample_dtype() == SampleDType::f32);
  CHECK(data.sample_shape() == Shape{5});
  check_read(data, spec, {8, 0, 5, 6, 7, 2, 2, 1});
}

TEST_CASE("a single-file dataset opens by plain path and moves", "[data]") {
  const std::string dir = fresh_test_dir("data_reader_single");
  const SampleFileSpec spec = image_spec();
  write_synthetic(dir + "/all.h5", spec, 0, 9);
  SampleDataset opened = SampleDataset::open(dir + "/all.h5", MPI_COMM_SELF);
  SampleDataset data = std::move(opened);
  CHECK(data.size() == 9);
  check_read(data, spec, {8, 1, 2, 3, 0});
}

TEST_CASE("collective transfer works on one rank too", "[data]") {
  const std::string dir = fresh_test_dir("data_reader_collective");
  const SampleFileSpec spec = image_spec();
  const std::string glob = write_synthetic_shards(dir + "/t", spec, {3, 5});
  Hdf5Tuning tuning;
  tuning.collective_transfer = true;
  tuning.collective_metadata_reads = true;
  SampleDataset data = SampleDataset::open(glob, MPI_COMM_SELF, tuning);
  check_read(data, spec, {7, 0, 1});
  check_read(data, spec, {6});  // shard 0 untouched: still read with an empty selection

  tuning.collective_transfer = false;
  CHECK_THROWS_AS(SampleDataset::open(glob, MPI_COMM_SELF, tuning), ConfigError);
}
