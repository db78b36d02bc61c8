// The tensor files of a Hugging Face model folder, as transformers' save_pretrained writes
// them (safe_serialization, the default):
//
//   model.safetensors                       every tensor, when they fit one shard; or
//   model-00001-of-0000N.safetensors ...    N shards (5-digit numbers) and
//   model.safetensors.index.json            {"metadata": {"total_size": <tensor bytes>},
//                                            "weight_map": {"<tensor>": "<shard file>", ...}}
//
// Sharding as transformers does it: tensors in order, a new shard when the next tensor would
// take the current one past the limit (a tensor larger than the limit gets a shard alone);
// total_size counts tensor bytes (headers not included).
#pragma once

#include "trellis/core/precision.hpp"
#include "trellis/train/hf/safetensors.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace trellis {

inline constexpr const char* kHfSingleFile = "model.safetensors";
inline constexpr const char* kHfIndexFile = "model.safetensors.index.json";

// Every tensor of a folder's safetensors files, validated (headers, the index's weight_map
// against the shards, no tensor in two files) before any is read; InputError naming the file.
class HfTensorFolder {
 public:
  explicit HfTensorFolder(const std::string& dir);

  const std::string& dir() const { return dir_; }
  std::vector<std::string> names() const;                       // sorted
  const SafetensorsEntry* find(const std::string& name) const;  // null when absent
  const std::string& file_of(const std::string& name) const;    // its file's path
  std::vector<float> read(const std::string& name) const;       // as float32
  std::size_t files() const { return files_.size(); }

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsReader>> files_;
  std::map<std::string, std::size_t> where_;  // tensor -> file
};

struct HfTensor {
  std::string name;
  Shape shape;
  std::vector<float> values;  // [numel(shape)]
};

// Writes `tensors` into the existing directory `dir` as `dtype`: one model.safetensors when
// they take at most shard_bytes, else numbered shards and the index. Returns the file names
// written. The caller publishes the folder (core/durable_file.hpp).
std::vector<std::string> write_hf_tensors(const std::string& dir,
                                          const std::vector<HfTensor>& tensors, Precision dtype,
                                          std::uint64_t shard_bytes);

}  // namespace trellis
