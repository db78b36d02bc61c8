#include "trellis/train/hf/hf_folder.hpp"

#include "trellis/core/durable_file.hpp"
#include "trellis/core/error.hpp"
#include "trellis/core/format.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace trellis {

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The shard files an index names, each once, in first-mention order, with the weight_map.
std::vector<std::string> index_shards(const std::string& path,
                                      std::map<std::string, std::string>& map) {
  Json index;
  try {
    index = Json::parse(read_text(path));
  } catch (const Json::exception& e) {
    throw InputError(path + ": not JSON: " + e.what());
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    throw InputError(path + ": no \"weight_map\" object (is this a safetensors index?)");
  std::vector<std::string> shards;
  for (const auto& [tensor, file] : index["weight_map"].items()) {
    // A shard is a file of this folder: a path elsewhere is no part of the model.
    if (!file.is_string() || file.get<std::string>().empty() ||
        file.get<std::string>().find('/') != std::string::npos || file.get<std::string>() == "..")
      throw InputError(path + ": weight_map[\"" + tensor + "\"] = " + file.dump() +
                       " is not a file name in the folder");
    const std::string name = file.get<std::string>();
    map[tensor] = name;
    if (std::find(shards.begin(), shards.end(), name) == shards.end()) shards.push_back(name);
  }
  return shards;
}

}  // namespace

HfTensorFolder::HfTensorFolder(const std::string& dir) : dir_(dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw InputError(dir + ": not a directory (a Hugging Face model folder is expected)");
  const std::string single = dir + "/" + kHfSingleFile, index = dir + "/" + kHfIndexFile;
  std::map<std::string, std::string> weight_map;
  std::vector<std::string> shards;
  if (fs::exists(index, ec)) {
    shards = index_shards(index, weight_map);
  } else if (fs::exists(single, ec)) {
    shards.push_back(kHfSingleFile);
  } else {
    throw InputError(dir + ": neither " + kHfSingleFile + " nor " + kHfIndexFile +
                     (fs::exists(dir + "/pytorch_model.bin", ec)
                          ? " (only safetensors are read: save_pretrained(..., "
                            "safe_serialization=True))"
                          : ""));
  }
  for (const std::string& shard : shards) {
    files_.push_back(std::make_unique<SafetensorsReader>(dir + "/" + shard));
    for (const SafetensorsEntry& e : files_.back()->tensors()) {
      const auto [it, fresh] = where_.emplace(e.name, files_.size() - 1);
      if (!fresh)
        throw InputError(files_.back()->path() + ": tensor '" + e.name + "' is also in " +
                         files_[it->second]->path());
    }
  }
  for (const auto& [tensor, file] : weight_map) {
    const auto it = where_.find(tensor);
    if (it == where_.end() || files_[it->second]->path() != dir + "/" + file)
      throw InputError(index + ": weight_map puts tensor '" + tensor + "' in " + file +
                       ", which does not hold it");
  }
}

std::vector<std::string> HfTensorFolder::names() const {
  std::vector<std::string> out;
  for (const auto& entry : where_) out.push_back(entry.first);
  return out;
}

const SafetensorsEntry* HfTensorFolder::find(const std::string& name) const {
  const auto it = where_.find(name);
  return it == where_.end() ? nullptr : files_[it->second]->find(name);
}

const std::string& HfTensorFolder::file_of(const std::string& name) const {
  const auto it = where_.find(name);
  if (it == where_.end()) throw InputError(dir_ + ": no tensor '" + name + "'");
  return files_[it->second]->path();
}

std::vector<float> HfTensorFolder::read(const std::string& name) const {
  const auto it = where_.find(name);
  if (it == where_.end()) throw InputError(dir_ + ": no tensor '" + name + "'");
  return files_[it->second]->read(name);
}

std::vector<std::string> write_hf_tensors(const std::string& dir,
                                          const std::vector<HfTensor>& tensors, Precision dtype,
                                          std::uint64_t shard_bytes) {
  // Shards: [first, end) ranges of `tensors`.
  std::vector<std::pair<std::size_t, std::size_t>> shards;
  std::uint64_t in_shard = 0, total = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::uint64_t bytes =
        static_cast<std::uint64_t>(shape_numel(tensors[i].shape)) * precision_bytes(dtype);
    if (shards.empty() || (in_shard > 0 && in_shard + bytes > shard_bytes)) {
      shards.emplace_back(i, i);
      in_shard = 0;
    }
    shards.back().second = i + 1;
    in_shard += bytes;
    total += bytes;
  }
  if (shards.empty()) shards.emplace_back(0, 0);
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  std::vector<std::string> files;
  Json weight_map = Json::object();
  for (std::size_t s = 0; s < shards.size(); ++s) {
    const std::string name =
        shards.size() == 1 ? kHfSingleFile
                           : format_text("model-%05zu-of-%05zu.safetensors", s + 1, shards.size());
    std::vector<SafetensorsTensor> part;
    for (std::size_t i = shards[s].first; i < shards[s].second; ++i) {
      part.push_back({tensors[i].name, tensors[i].shape, tensors[i].values.data()});
      weight_map[tensors[i].name] = name;
    }
    write_safetensors(dir + "/" + name, part, dtype, metadata);
    fsync_file(dir + "/" + name);
    files.push_back(name);
  }
  if (shards.size() > 1) {
    const Json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    write_file_durably(dir + "/" + kHfIndexFile, index.dump(2) + "\n");
    files.push_back(kHfIndexFile);
  }
  return files;
}

}  // namespace trellis
