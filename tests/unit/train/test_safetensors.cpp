// The safetensors reader and writer (train/hf/safetensors.hpp) and the folder of shards
// (hf_folder.hpp): round trips in every dtype, and each header defect named with the file and
// the tensor.
#include "trellis/core/error.hpp"
#include "trellis/train/hf/hf_folder.hpp"
#include "trellis/train/hf/safetensors.hpp"

#include "catch.hpp"
#include "unit/support/data_helpers.hpp"
#include "unit/support/text_helpers.hpp"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace trellis;
using test::contains;
using test::message_of;

namespace {

std::vector<float> ramp(std::size_t n, float scale) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * (static_cast<float>(i) - 2.7f) / 3.0f;
  return v;
}

// A file from a header text and `data_bytes` zero bytes of data (for the defect tests).
std::string raw_file(const std::string& dir, const std::string& header, std::size_t data_bytes,
                     std::uint64_t stated_length = 0) {
  const std::string path = dir + "/raw.safetensors";
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const std::uint64_t n = stated_length ? stated_length : header.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>(n >> (8 * i)));
  out << header << std::string(data_bytes, '\0');
  return path;
}

std::string read_error(const std::string& path) {
  return message_of<InputError>([&] { SafetensorsReader reader(path); }, "(no error)");
}

}  // namespace

TEST_CASE("safetensors: F32, BF16 and F16 files read back as written", "[hf][safetensors]") {
  const std::string dir = testing::fresh_test_dir("safetensors_round_trip");
  const std::vector<float> a = ramp(6, 1.0f), b = ramp(5, 1e-3f), c = {3.25f};
  const std::vector<SafetensorsTensor> tensors = {
      {"layer.weight", {2, 3}, a.data()}, {"layer.bias", {5}, b.data()}, {"scale", {}, c.data()}};
  for (Precision p : {Precision::fp32, Precision::bf16, Precision::fp16}) {
    const std::string path = dir + "/" + precision_name(p) + ".safetensors";
    write_safetensors(path, tensors, p, {{"format", "pt"}});
    const SafetensorsReader reader(path);
    REQUIRE(reader.tensors().size() == 3);
    CHECK(reader.metadata().at("format") == "pt");
    CHECK(reader.find("layer.weight")->shape == Shape{2, 3});
    CHECK(reader.find("layer.weight")->dtype == safetensors_dtype(p));
    CHECK(reader.find("scale")->shape.empty());
    CHECK(reader.find("missing") == nullptr);
    for (const SafetensorsTensor& t : tensors) {
      const std::vector<float> back = reader.read(t.name);
      REQUIRE(back.size() == static_cast<std::size_t>(shape_numel(t.shape)));
      for (std::size_t i = 0; i < back.size(); ++i)
        CHECK(back[i] == round_to(p, t.values[i]));  // exact in fp32, rounded once in 16 bits
    }
    // The data section starts 8-byte aligned, as safetensors' writer keeps it.
    std::ifstream in(path, std::ios::binary);
    std::uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= static_cast<std::uint64_t>(in.get()) << (8 * i);
    CHECK(n % 8 == 0);
  }
}

TEST_CASE("safetensors: header defects are named with the file and tensor", "[hf][safetensors]") {
  const std::string dir = testing::fresh_test_dir("safetensors_defects");
  std::string e;

  e = read_error(
      raw_file(dir, R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 400]}})", 8));
  CHECK(contains(e, "raw.safetensors"));
  CHECK(contains(e, "tensor 'w'"));
  CHECK(contains(e, "not inside the data section of 8 bytes"));

  e = read_error(
      raw_file(dir, R"({"w": {"dtype": "F33", "shape": [2], "data_offsets": [0, 8]}})", 8));
  CHECK(contains(e, "tensor 'w'"));
  CHECK(contains(e, "unknown dtype \"F33\""));

  e = read_error(
      raw_file(dir, R"({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 20]}})", 24));
  CHECK(contains(e, "tensor 'w'"));
  CHECK(contains(e, "hold 20 bytes, but F32 of shape [2, 3] takes 24"));

  e = read_error(raw_file(dir,
                          R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                              "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                          12));
  CHECK(contains(e, "tensor 'b'"));
  CHECK(contains(e, "overlap those of 'a'"));

  e = read_error(
      raw_file(dir, R"({"w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", 8));
  CHECK(contains(e, "tensor 'w'"));
  CHECK(contains(e, "not a non-negative integer"));

  e = read_error(raw_file(dir, R"({"w": {"dtype": "F32"}})", 0));
  CHECK(contains(e, "tensor 'w': no \"shape\""));

  e = read_error(raw_file(dir, "{not json", 0));
  CHECK(contains(e, "raw.safetensors: not a valid safetensors file: its header is not JSON"));

  e = read_error(raw_file(dir, "{}", 0, 1u << 20));
  CHECK(contains(e, "header length 1048576 runs past the end of the file"));

  // A known dtype that Trellis does not read validates, but reading it is refused by name.
  const std::string ints =
      raw_file(dir, R"({"steps": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}})", 8);
  const SafetensorsReader reader(ints);
  e = message_of<InputError>([&] { reader.read("steps"); });
  CHECK(contains(e, "tensor 'steps': dtype I64 is not supported"));
}

TEST_CASE("hf folder: tensors past the shard size go to numbered shards with an index",
          "[hf][safetensors]") {
  const std::string dir = testing::fresh_test_dir("hf_folder_shards");
  std::vector<HfTensor> tensors;
  for (int i = 0; i < 5; ++i)
    tensors.push_back({"t" + std::to_string(i), {4, 4}, ramp(16, static_cast<float>(i + 1))});
  // 64 bytes each: two per 130-byte shard.
  const std::vector<std::string> files = write_hf_tensors(dir, tensors, Precision::fp32, 130);
  CHECK(files == std::vector<std::string>{
                     "model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                     "model-00003-of-00003.safetensors", "model.safetensors.index.json"});
  const std::string index = test::read_all(dir + "/" + kHfIndexFile);
  CHECK(contains(index, "\"total_size\": 320"));
  CHECK(contains(index, "\"t4\": \"model-00003-of-00003.safetensors\""));
  const HfTensorFolder folder(dir);
  CHECK(folder.files() == 3);
  CHECK(folder.names().size() == 5);
  CHECK(contains(folder.file_of("t2"), "model-00002-of-00003.safetensors"));
  for (const HfTensor& t : tensors) CHECK(folder.read(t.name) == t.values);

  // An index that puts a tensor in a shard without it is named.
  std::ofstream(dir + "/" + kHfIndexFile)
      << R"({"weight_map": {"t0": "model-00002-of-00003.safetensors"}})";
  const std::string e = message_of<InputError>([&] { HfTensorFolder bad(dir); });
  CHECK(contains(e, "weight_map puts tensor 't0' in model-00002-of-00003.safetensors"));

  // Below the limit: one model.safetensors, no index.
  const std::string one = testing::fresh_test_dir("hf_folder_single");
  CHECK(write_hf_tensors(one, tensors, Precision::bf16, 1u << 20) ==
        std::vector<std::string>{kHfSingleFile});
  CHECK(HfTensorFolder(one).names().size() == 5);
  CHECK(contains(message_of<InputError>([&] { HfTensorFolder none(dir + "/nowhere"); }),
                 "not a directory"));
}
