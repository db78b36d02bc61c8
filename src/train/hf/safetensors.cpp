#include "trellis/train/hf/safetensors.hpp"

#include "trellis/core/error.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>

namespace trellis {

namespace {

using Json = nlohmann::json;

// safetensors' own cap on the header (its Rust reader refuses larger ones): a corrupt length
// must not make us allocate gigabytes.
constexpr std::uint64_t kMaxHeaderBytes = 100u << 20;

[[noreturn]] void bad_file(const std::string& path, const std::string& what) {
  throw InputError(path + ": not a valid safetensors file: " + what);
}

[[noreturn]] void bad_tensor(const std::string& path, const std::string& name,
                             const std::string& what) {
  throw InputError(path + ": tensor '" + name + "': " + what);
}

std::uint64_t json_count(const Json& value, const std::string& path, const std::string& name,
                         const char* field) {
  if (!value.is_number_unsigned())
    bad_tensor(path, name,
               std::string(field) + " holds " + value.dump() + ", not a non-negative integer");
  return value.get<std::uint64_t>();
}

SafetensorsEntry parse_entry(const std::string& name, const Json& value, const std::string& path,
                             std::uint64_t data_bytes) {
  if (!value.is_object()) bad_tensor(path, name, "its header entry is not a JSON object");
  for (const char* field : {"dtype", "shape", "data_offsets"})
    if (!value.contains(field)) bad_tensor(path, name, std::string("no \"") + field + "\"");
  SafetensorsEntry e;
  e.name = name;
  if (!value["dtype"].is_string()) bad_tensor(path, name, "dtype is not a string");
  e.dtype = value["dtype"].get<std::string>();
  const std::size_t bytes = safetensors_dtype_bytes(e.dtype);
  if (bytes == 0) bad_tensor(path, name, "unknown dtype \"" + e.dtype + "\"");
  const Json& shape = value["shape"];
  if (!shape.is_array()) bad_tensor(path, name, "shape is not a list");
  // numel * bytes must not wrap around: every extent is checked against what is left.
  std::uint64_t numel = 1;
  for (const Json& extent : shape) {
    const std::uint64_t n = json_count(extent, path, name, "shape");
    if (n > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ||
        (n > 0 && numel > std::numeric_limits<std::uint64_t>::max() / bytes / n))
      bad_tensor(path, name, "shape " + shape.dump() + " is too large");
    numel *= n;
    e.shape.push_back(static_cast<std::int64_t>(n));
  }
  const Json& offsets = value["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2)
    bad_tensor(path, name, "data_offsets " + offsets.dump() + " is not [begin, end]");
  e.begin = json_count(offsets[0], path, name, "data_offsets");
  e.end = json_count(offsets[1], path, name, "data_offsets");
  if (e.end < e.begin || e.end > data_bytes)
    bad_tensor(path, name,
               "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                   "] are not inside the data section of " + std::to_string(data_bytes) +
                   " bytes (a truncated file?)");
  if (e.end - e.begin != numel * bytes)
    bad_tensor(path, name,
               "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                   "] hold " + std::to_string(e.end - e.begin) + " bytes, but " + e.dtype +
                   " of shape " + shape_string(e.shape) + " takes " +
                   std::to_string(numel * bytes));
  return e;
}

}  // namespace

std::size_t safetensors_dtype_bytes(const std::string& dtype) {
  static const std::map<std::string, std::size_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"I64", 8}, {"U64", 8},     {"F64", 8}};
  const auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

const char* safetensors_dtype(Precision p) {
  return p == Precision::bf16 ? "BF16" : p == Precision::fp16 ? "F16" : "F32";
}

SafetensorsReader::SafetensorsReader(const std::string& path) : path_(path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw InputError(path + ": cannot open (" + std::strerror(errno) + ")");
  const auto file_bytes = static_cast<std::uint64_t>(in.tellg());
  if (file_bytes < 8) bad_file(path, "shorter than its 8-byte header length");
  unsigned char length[8];
  in.seekg(0);
  in.read(reinterpret_cast<char*>(length), 8);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | length[i];  // little-endian
  if (n > file_bytes - 8)
    bad_file(path, "header length " + std::to_string(n) + " runs past the end of the file (" +
                       std::to_string(file_bytes) + " bytes)");
  if (n > kMaxHeaderBytes)
    bad_file(path, "header length " + std::to_string(n) + " exceeds safetensors' limit of " +
                       std::to_string(kMaxHeaderBytes) + " bytes");
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  if (!in) bad_file(path, "cannot read its header");
  data_start_ = 8 + n;
  Json header;
  try {
    header = Json::parse(text);
  } catch (const Json::exception& e) {
    bad_file(path, std::string("its header is not JSON: ") + e.what());
  }
  if (!header.is_object()) bad_file(path, "its header is not a JSON object");
  const std::uint64_t data_bytes = file_bytes - data_start_;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) bad_file(path, "__metadata__ is not a JSON object");
      for (const auto& [key, text_value] : value.items()) {
        if (!text_value.is_string())
          bad_file(path, "__metadata__[\"" + key + "\"] is not a string");
        metadata_[key] = text_value.get<std::string>();
      }
      continue;
    }
    tensors_.push_back(parse_entry(name, value, path, data_bytes));
  }
  std::sort(tensors_.begin(), tensors_.end(),
            [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
              return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
            });
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    // Sorted by begin, a tensor overlaps another exactly when it starts before the previous
    // one ends (empty tensors take no bytes and overlap nothing).
    if (i > 0 && tensors_[i].begin < tensors_[i].end && tensors_[i].begin < tensors_[i - 1].end)
      bad_tensor(path, tensors_[i].name,
                 "its bytes [" + std::to_string(tensors_[i].begin) + ", " +
                     std::to_string(tensors_[i].end) + ") overlap those of '" +
                     tensors_[i - 1].name + "'");
    index_[tensors_[i].name] = i;
  }
}

const SafetensorsEntry* SafetensorsReader::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

std::vector<float> SafetensorsReader::read(const std::string& name) const {
  const SafetensorsEntry* e = find(name);
  if (!e) throw InputError(path_ + ": no tensor '" + name + "'");
  const std::size_t bytes = safetensors_dtype_bytes(e->dtype);
  if (e->dtype != "F32" && e->dtype != "F16" && e->dtype != "BF16")
    bad_tensor(path_, name, "dtype " + e->dtype + " is not supported (F32, F16 and BF16 are)");
  const std::size_t numel = (e->end - e->begin) / bytes;
  std::vector<char> raw(e->end - e->begin);
  std::ifstream in(path_, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(data_start_ + e->begin));
  in.read(raw.data(), static_cast<std::streamsize>(raw.size()));
  if (!in)
    bad_tensor(path_, name, "cannot read its data (" + std::string(std::strerror(errno)) + ")");
  std::vector<float> out(numel);
  if (e->dtype == "F32") {
    std::memcpy(out.data(), raw.data(), raw.size());
    return out;
  }
  const bool bf16 = e->dtype == "BF16";
  for (std::size_t i = 0; i < numel; ++i) {
    std::uint16_t h = 0;
    std::memcpy(&h, raw.data() + 2 * i, 2);
    out[i] = bf16 ? bf16_bits_to_float(h) : fp16_bits_to_float(h);
  }
  return out;
}

void write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                       Precision dtype, const std::map<std::string, std::string>& metadata) {
  const std::size_t bytes = precision_bytes(dtype);
  Json header = Json::object();
  std::uint64_t offset = 0;
  for (const SafetensorsTensor& t : tensors) {
    const auto size = static_cast<std::uint64_t>(shape_numel(t.shape)) * bytes;
    header[t.name] = {{"dtype", safetensors_dtype(dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + size}}};
    offset += size;
  }
  header["__metadata__"] = metadata;
  std::string text = header.dump();
  // The data section starts 8-byte aligned, as safetensors' own writer keeps it.
  text.append((8 - text.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  unsigned char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(text.size() >> (8 * i));
  out.write(reinterpret_cast<const char*>(length), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  std::vector<std::uint16_t> half;
  for (const SafetensorsTensor& t : tensors) {
    const auto numel = static_cast<std::size_t>(shape_numel(t.shape));
    if (dtype == Precision::fp32) {
      out.write(reinterpret_cast<const char*>(t.values),
                static_cast<std::streamsize>(numel * sizeof(float)));
      continue;
    }
    half.resize(numel);
    for (std::size_t i = 0; i < numel; ++i) half[i] = to_half_bits(dtype, t.values[i]);
    out.write(reinterpret_cast<const char*>(half.data()),
              static_cast<std::streamsize>(numel * sizeof(std::uint16_t)));
  }
  out.close();
  if (!out) throw Error(path + ": cannot write (" + std::string(std::strerror(errno)) + ")");
}

}  // namespace trellis
