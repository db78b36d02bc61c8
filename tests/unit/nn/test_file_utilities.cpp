// The small utilities under checkpoints and weights: the one HDF5 format/version check, the
// tensor list codec, ShardSpec's piece arithmetic (and unshard built on it), durable files.
#include "catch.hpp"
#include "unit/support/text_helpers.hpp"

#include "unit/support/data_helpers.hpp"

#include "trellis/core/durable_file.hpp"
#include "trellis/core/tensor_list_codec.hpp"
#include "trellis/data/hdf5_attributes.hpp"
#include "trellis/nn/parameter_store.hpp"

#include <filesystem>
#include <fstream>
#include <numeric>

using namespace trellis;
using namespace trellis::testing;

namespace {

using trellis::test::contains;

std::string message_of(const std::function<void()>& f) {
  return trellis::test::message_of<InputError>(f, "(no InputError)");
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("check_file_format names the attribute, the expected and the found value",
          "[data][hdf5]") {
  const std::string dir = fresh_test_dir("file_format");
  hdf5_quiet();
  H5File file(
      TRELLIS_H5(H5Fcreate((dir + "/f.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)));
  const hid_t f = file.get();
  auto check = [&](int max_version) {
    return message_of([&] { check_file_format(f, "trellis.x", max_version, "a hint"); });
  };
  std::string m = check(1);
  CHECK(contains(m, "attribute 'format' is missing (expected \"trellis.x\"; a hint)"));
  write_string_attribute(f, "format", "other");
  m = check(1);
  CHECK(contains(m, "attribute 'format': expected \"trellis.x\", found \"other\" (a hint)"));
  write_string_attribute(f, "format", "trellis.x");
  CHECK(contains(check(1), "attribute 'format_version' is missing"));
  write_int_attribute(f, "format_version", 3);
  m = check(1);
  CHECK(contains(m, "attribute 'format_version': expected 1, found 3"));
  m = check(2);
  CHECK(contains(m, "attribute 'format_version': expected 1..2, found 3"));
  CHECK(check_file_format(f, "trellis.x", 3) == 3);
  write_int_attribute(f, "format_version", 0);
  CHECK(contains(check(2), "found 0"));
}

TEST_CASE("the tensor list codec round-trips and rejects truncated bytes", "[core]") {
  const std::vector<HostTensor> tensors = {
      {"params/fc1.weight", {2, 3}, {1, 2, 3, 4, 5, 6}},
      {"optim/scale", {}, {0.5f}},
      {"shape/only", {4, 0, 2}, {}},
      {"", {1}, {-1.0f}},
  };
  const std::string bytes = encode_tensors(tensors);
  const std::vector<HostTensor> back = decode_tensors(bytes);
  REQUIRE(back.size() == tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    CHECK(back[i].name == tensors[i].name);
    CHECK(back[i].shape == tensors[i].shape);
    CHECK(back[i].values == tensors[i].values);
  }
  // Concatenated lists decode as one list (what MPI_Allgatherv delivers).
  CHECK(decode_tensors(bytes + bytes).size() == 2 * tensors.size());
  CHECK(decode_tensors("").empty());
  for (std::size_t cut : {std::size_t{1}, std::size_t{9}, bytes.size() - 1})
    CHECK_THROWS_AS(decode_tensors(bytes.substr(0, cut)), Error);
}

TEST_CASE("ShardSpec maps pieces into the logical tensor", "[nn][params]") {
  const Shape logical = {2, 12, 3};  // dim 1: 2 sections x 3 parts of 2 rows
  const nn::ShardSpec spec = nn::ShardSpec::split(1, 3, 1, 2);
  CHECK(spec.divides(logical));
  CHECK(spec.piece_shape(logical) == Shape{2, 4, 3});
  const kernels::ShardIndexMap map = spec.index_map(logical);
  // Piece element (o, s, j, i) = (1, 1, 0, 2) -> logical (1, (1*3 + 1)*2 + 0, 2).
  CHECK(map(((1 * 2 + 1) * 2 + 0) * 3 + 2) == (1 * 12 + 8) * 3 + 2);
  CHECK_FALSE(nn::ShardSpec::split(1, 5, 0).divides(logical));
  CHECK_THROWS_AS(nn::ShardSpec::split(1, 5, 0).piece_shape(logical), Error);
  CHECK_THROWS_AS(nn::ShardSpec::split(3, 2, 0).piece_shape(logical), Error);
  CHECK_THROWS_AS(nn::ShardSpec{}.piece_shape({-1}), Error);
  CHECK(nn::ShardSpec{}.piece_shape(logical) == logical);
  CHECK(nn::ShardSpec{}.index_map(logical)(17) == 17);
}

TEST_CASE("durable files: write, publish by rename over a file or a directory, remove", "[core]") {
  namespace fs = std::filesystem;
  const std::string dir = fresh_test_dir("durable_file");
  write_file_durably(dir + "/a.tmp", "one\n");
  publish_by_rename(dir + "/a.tmp", dir + "/a");
  CHECK(read_text(dir + "/a") == "one\n");
  write_file_durably(dir + "/a.tmp", "two\n");
  publish_by_rename(dir + "/a.tmp", dir + "/a");
  CHECK(read_text(dir + "/a") == "two\n");
  CHECK_FALSE(fs::exists(dir + "/a.tmp"));

  // A directory (non-empty) replaced by a directory, an empty directory by a file.
  fs::create_directories(dir + "/d.tmp");
  write_file_durably(dir + "/d.tmp/x", "new");
  fs::create_directories(dir + "/d");
  write_file_durably(dir + "/d/old", "old");
  publish_by_rename(dir + "/d.tmp", dir + "/d");
  CHECK(read_text(dir + "/d/x") == "new");
  CHECK_FALSE(fs::exists(dir + "/d/old"));
  CHECK_FALSE(fs::exists(dir + "/d.old"));
  fs::create_directories(dir + "/latest");
  write_file_durably(dir + "/latest.tmp", "step\n");
  publish_by_rename(dir + "/latest.tmp", dir + "/latest");
  CHECK(read_text(dir + "/latest") == "step\n");

  CHECK(parent_directory(dir + "/a") == dir);
  CHECK(parent_directory("a") == ".");
  remove_tree(dir + "/d");
  CHECK_FALSE(fs::exists(dir + "/d"));
  remove_tree(dir + "/never-there");  // nothing to do
  CHECK_THROWS_AS(write_file_durably(dir + "/no/such/dir/f", "x"), Error);
  CHECK_THROWS_AS(publish_by_rename(dir + "/missing.tmp", dir + "/missing"), Error);
}
