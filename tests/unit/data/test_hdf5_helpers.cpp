// TRELLIS_H5, the RAII handles, attribute helpers and shard naming.
#include "catch.hpp"

#include "unit/support/data_helpers.hpp"

#include "trellis/data/hdf5_attributes.hpp"

using namespace trellis;
using namespace trellis::testing;

TEST_CASE("TRELLIS_H5 throws naming the call and HDF5's innermost message", "[data][hdf5]") {
  hdf5_quiet();
  try {
    TRELLIS_H5(H5Fopen("/nonexistent/dir/file.h5", H5F_ACC_RDONLY, H5P_DEFAULT));
    FAIL("no exception");
  } catch (const Error& e) {
    const std::string message = e.what();
    INFO(message);
    CHECK(message.find("HDF5 call `H5Fopen(\"/nonexistent/dir/file.h5\"") != std::string::npos);
    CHECK(message.find("test_hdf5_helpers.cpp") != std::string::npos);
    CHECK(message.find("(in H5") != std::string::npos);  // innermost entry's function
  }
  // The error stack was consumed: the next failure reports its own detail only.
  CHECK(hdf5_error_detail().empty());
  // Success passes the value through.
  H5Space space(TRELLIS_H5(H5Screate(H5S_SCALAR)));
  CHECK(space.valid());
}

TEST_CASE("handles close once and move ownership", "[data][hdf5]") {
  H5Space a(TRELLIS_H5(H5Screate(H5S_SCALAR)));
  const hid_t id = a.get();
  CHECK(H5Iis_valid(id) > 0);
  H5Space b = std::move(a);
  CHECK_FALSE(a.valid());
  CHECK(b.get() == id);
  b.reset();
  CHECK(H5Iis_valid(id) <= 0);
}

TEST_CASE("attributes round-trip through the helpers", "[data][hdf5]") {
  const std::string dir = fresh_test_dir("hdf5_attributes");
  hdf5_quiet();
  H5File file(
      TRELLIS_H5(H5Fcreate((dir + "/a.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)));
  write_string_attribute(file.get(), "s", "héllo");
  write_int_attribute(file.get(), "i", -7);
  write_float_attribute(file.get(), "f", {0.5f, 2.0f});
  write_float_attribute(file.get(), "g", {3.0f}, /*scalar=*/true);
  write_int_attribute(file.get(), "i", 8);  // replaces

  CHECK(has_attribute(file.get(), "s"));
  CHECK_FALSE(has_attribute(file.get(), "absent"));
  CHECK(read_string_attribute(file.get(), "s") == "héllo");
  CHECK(read_int_attribute(file.get(), "i") == 8);
  CHECK(read_float_attribute(file.get(), "f") == std::vector<double>{0.5, 2.0});
  CHECK(read_float_attribute(file.get(), "g") == std::vector<double>{3.0});
  CHECK(read_float_attribute(file.get(), "i") == std::vector<double>{8.0});  // ints are numbers
  CHECK_THROWS_AS(read_int_attribute(file.get(), "f"), InputError);
  CHECK_THROWS_AS(read_string_attribute(file.get(), "i"), InputError);
  CHECK_THROWS_AS(read_int_attribute(file.get(), "absent"), InputError);
}

TEST_CASE("shard names and glob expansion", "[data][hdf5]") {
  CHECK(shard_file_name("data/x/train", 3, 12) == "data/x/train-00003-of-00012.h5");
  const std::string dir = fresh_test_dir("shard_paths");
  const SampleFileSpec spec = image_spec();
  write_synthetic_shards(dir + "/t", spec, {1, 1, 1});
  const std::vector<std::string> files = expand_data_spec(dir + "/t-*.h5");
  REQUIRE(files.size() == 3);
  CHECK(files[0] == shard_file_name(dir + "/t", 0, 3));
  CHECK(files[2] == shard_file_name(dir + "/t", 2, 3));
  CHECK(expand_data_spec("plain/path.h5") == std::vector<std::string>{"plain/path.h5"});
  CHECK(resolve_data_files({dir + "/t-*.h5"}, MPI_COMM_SELF) == files);
}
