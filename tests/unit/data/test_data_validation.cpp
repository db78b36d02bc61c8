// SampleDataset::open and read reject bad files with an InputError that names the file, the
// dataset or attribute, and what was expected versus found.
#include "catch.hpp"

#include "unit/support/data_helpers.hpp"

#include "trellis/data/hdf5_attributes.hpp"
#include "trellis/data/sample_dataset.hpp"

#include <fstream>

using namespace trellis;
using namespace trellis::testing;

namespace {

// Opening `spec` must throw InputError whose message contains every one of `parts`.
void expect_open_error(const std::string& spec, const std::vector<std::string>& parts) {
  try {
    SampleDataset::open(spec, MPI_COMM_SELF);
    FAIL("no InputError for " << spec);
  } catch (const InputError& e) {
    const std::string message = e.what();
    INFO("message: " << message);
    for (const std::string& part : parts) CHECK(message.find(part) != std::string::npos);
    CHECK(e.code() == ExitCode::bad_input);
  }
}

// A valid 6-row file at dir/name, then `edit` breaks it.
std::string broken_file(const std::string& dir, const std::string& name,
                        const std::function<void(hid_t)>& edit) {
  const std::string path = dir + "/" + name;
  write_synthetic(path, image_spec(), 0, 6);
  edit_file(path, edit);
  return path;
}

}  // namespace

TEST_CASE("missing, unmatched and non-HDF5 files", "[data]") {
  const std::string dir = fresh_test_dir("data_validation_files");
  expect_open_error(dir + "/nope.h5", {dir + "/nope.h5", "no such file"});
  expect_open_error(dir + "/nothing-*.h5", {dir + "/nothing-*.h5", "no files match"});

  std::ofstream(dir + "/text.h5") << "this is not an HDF5 file\n";
  expect_open_error(dir + "/text.h5", {dir + "/text.h5", "not an HDF5 file"});
}

TEST_CASE("incomplete or mixed shard sets", "[data]") {
  const std::string dir = fresh_test_dir("data_validation_shards");
  const SampleFileSpec spec = image_spec();
  write_synthetic(shard_file_name(dir + "/s", 0, 3), spec, 0, 2);
  write_synthetic(shard_file_name(dir + "/s", 2, 3), spec, 2, 2);
  expect_open_error(dir + "/s-*.h5", {"s-00001-of-00003.h5", "missing"});

  write_synthetic(shard_file_name(dir + "/s", 1, 3), spec, 4, 2);
  write_synthetic(shard_file_name(dir + "/s", 0, 2), spec, 0, 2);  // left from another split
  expect_open_error(dir + "/s-*.h5", {dir + "/s-*.h5", "different splits"});
}

TEST_CASE("missing or mistyped datasets", "[data]") {
  const std::string dir = fresh_test_dir("data_validation_datasets");
  std::string path = broken_file(
      dir, "no_labels.h5", [](hid_t file) { TRELLIS_H5(H5Ldelete(file, "labels", H5P_DEFAULT)); });
  expect_open_error(path, {path, "'/labels'", "missing"});

  path = broken_file(dir, "no_samples.h5",
                     [](hid_t file) { TRELLIS_H5(H5Ldelete(file, "samples", H5P_DEFAULT)); });
  expect_open_error(path, {path, "'/samples'", "missing"});

  path = broken_file(dir, "int16_samples.h5", [](hid_t file) {
    replace_dataset(file, "samples", H5T_STD_I16LE, {6, 2, 3, 2});
  });
  expect_open_error(path, {path, "'/samples'", "expected uint8 or float32", "found int16"});

  path = broken_file(dir, "float_labels.h5",
                     [](hid_t file) { replace_dataset(file, "labels", H5T_IEEE_F32LE, {6}); });
  expect_open_error(path, {path, "'/labels'", "expected int32 or uint8", "found float32"});

  path = broken_file(dir, "short_labels.h5",
                     [](hid_t file) { replace_dataset(file, "labels", H5T_STD_I32LE, {5}); });
  expect_open_error(path, {path, "'/labels'", "expected 6 rows", "found 5"});

  path = broken_file(dir, "rank1_samples.h5",
                     [](hid_t file) { replace_dataset(file, "samples", H5T_STD_U8LE, {6}); });
  expect_open_error(path, {path, "'/samples'", "rank >= 2", "found rank 1"});
}

TEST_CASE("missing or wrong attributes", "[data]") {
  const std::string dir = fresh_test_dir("data_validation_attributes");
  std::string path = broken_file(dir, "no_classes.h5",
                                 [](hid_t file) { TRELLIS_H5(H5Adelete(file, "num_classes")); });
  expect_open_error(path, {path, "'num_classes'", "missing"});

  path = broken_file(dir, "zero_classes.h5",
                     [](hid_t file) { write_int_attribute(file, "num_classes", 0); });
  expect_open_error(path, {path, "'num_classes'", "positive", "found 0"});

  path =
      broken_file(dir, "no_format.h5", [](hid_t file) { TRELLIS_H5(H5Adelete(file, "format")); });
  expect_open_error(path, {path, "'format'", "missing"});

  // A fixed-length string, as other writers produce: read, then rejected for its value.
  path = broken_file(dir, "other_format.h5", [](hid_t file) {
    TRELLIS_H5(H5Adelete(file, "format"));
    H5Type type(TRELLIS_H5(H5Tcopy(H5T_C_S1)));
    TRELLIS_H5(H5Tset_size(type.get(), 5));
    H5Space space(TRELLIS_H5(H5Screate(H5S_SCALAR)));
    H5Attribute attribute(
        TRELLIS_H5(H5Acreate2(file, "format", type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT)));
    TRELLIS_H5(H5Awrite(attribute.get(), type.get(), "other"));
  });
  expect_open_error(path, {path, "'format'", "\"trellis.samples\"", "found \"other\""});

  path = broken_file(dir, "version2.h5",
                     [](hid_t file) { write_int_attribute(file, "format_version", 2); });
  expect_open_error(path, {path, "'format_version'", "expected 1", "found 2"});

  path = broken_file(dir, "string_version.h5",
                     [](hid_t file) { write_string_attribute(file, "format_version", "1"); });
  expect_open_error(path, {path, "'format_version'", "expected one integer", "found string"});

  path = broken_file(dir, "three_means.h5", [](hid_t file) {
    write_float_attribute(file, "mean", {0.f, 0.f, 0.f});
  });
  expect_open_error(path, {path, "'mean'", "1 or 2", "found 3"});

  path = broken_file(dir, "zero_std.h5", [](hid_t file) {
    write_float_attribute(file, "std", {1.f, 0.f});
  });
  expect_open_error(path, {path, "'std'", "positive"});

  path = broken_file(dir, "no_scale.h5", [](hid_t file) { TRELLIS_H5(H5Adelete(file, "scale")); });
  expect_open_error(path, {path, "'scale'", "missing"});
}

TEST_CASE("shards that disagree are rejected naming both files", "[data]") {
  const std::string dir = fresh_test_dir("data_validation_disagree");
  SampleFileSpec spec = image_spec();
  write_synthetic(shard_file_name(dir + "/d", 0, 2), spec, 0, 3);
  spec.sample_shape = {2, 2, 3};
  write_synthetic(shard_file_name(dir + "/d", 1, 2), spec, 3, 3);
  expect_open_error(dir + "/d-*.h5",
                    {shard_file_name(dir + "/d", 1, 2), shard_file_name(dir + "/d", 0, 2),
                     "sample shape", "[2, 2, 3]", "[2, 3, 2]"});

  spec = image_spec();
  spec.num_classes = 9;
  write_synthetic(shard_file_name(dir + "/d", 1, 2), spec, 3, 3);
  expect_open_error(dir + "/d-*.h5", {shard_file_name(dir + "/d", 1, 2), "'num_classes'"});
}

TEST_CASE("a label outside [0, num_classes) fails the read naming file, index and value",
          "[data]") {
  const std::string dir = fresh_test_dir("data_validation_label");
  const SampleFileSpec spec = image_spec();
  write_synthetic(shard_file_name(dir + "/l", 0, 2), spec, 0, 4);
  write_synthetic(shard_file_name(dir + "/l", 1, 2), spec, 4, 4);
  const std::string bad_file = shard_file_name(dir + "/l", 1, 2);
  edit_file(bad_file, [](hid_t file) {
    H5Dataset labels(TRELLIS_H5(H5Dopen2(file, "labels", H5P_DEFAULT)));
    H5Space space(TRELLIS_H5(H5Dget_space(labels.get())));
    const hsize_t row = 2, one = 1;
    TRELLIS_H5(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, &row, nullptr, &one, nullptr));
    H5Space memory(TRELLIS_H5(H5Screate_simple(1, &one, nullptr)));
    const std::int32_t value = 99;
    TRELLIS_H5(
        H5Dwrite(labels.get(), H5T_NATIVE_INT32, memory.get(), space.get(), H5P_DEFAULT, &value));
  });

  SampleDataset data = SampleDataset::open(dir + "/l-*.h5", MPI_COMM_SELF);
  std::vector<float> out(3 * 12);
  std::vector<std::int32_t> labels(3);
  CHECK_NOTHROW(data.read({0, 5, 7}, out.data(), labels.data()));
  try {
    data.read({0, 6, 1}, out.data(), labels.data());
    FAIL("no InputError for label 99");
  } catch (const InputError& e) {
    const std::string message = e.what();
    INFO(message);
    CHECK(message.find(bad_file) != std::string::npos);
    CHECK(message.find("global index 6") != std::string::npos);
    CHECK(message.find("99") != std::string::npos);
  }
}

TEST_CASE("no HDF5 object stays open after a dataset is closed or fails to open", "[data]") {
  const std::string dir = fresh_test_dir("data_validation_leaks");
  const auto open_objects = [] { return H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL); };
  const ssize_t before = open_objects();
  const std::string glob = write_synthetic_shards(dir + "/ok", image_spec(), {3, 4});
  {
    SampleDataset data = SampleDataset::open(glob, MPI_COMM_SELF);
    std::vector<float> out(2 * 12);
    std::vector<std::int32_t> labels(2);
    data.read({6, 0}, out.data(), labels.data());
    CHECK(open_objects() > before);
  }
  CHECK(open_objects() == before);
  // The second shard is broken: the first, already open, must be closed during unwinding.
  write_synthetic(shard_file_name(dir + "/bad", 0, 2), image_spec(), 0, 3);
  broken_file(dir, "bad-00001-of-00002.h5",
              [](hid_t file) { TRELLIS_H5(H5Ldelete(file, "labels", H5P_DEFAULT)); });
  CHECK_THROWS_AS(SampleDataset::open(dir + "/bad-*.h5", MPI_COMM_SELF), InputError);
  CHECK(open_objects() == before);
}
