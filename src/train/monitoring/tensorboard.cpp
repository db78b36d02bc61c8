// The event file is a TFRecord stream of serialized tensorboard.Event protobufs.
//
// TFRecord, per record: uint64 length (little-endian), uint32 masked CRC-32C of those 8 bytes,
// the data, uint32 masked CRC-32C of the data (see masked_crc32c).
//
// Protobuf wire format: each field is a varint key (field_number << 3 | wire_type), then a
// varint (type 0), 8 little-endian bytes (type 1), a varint length and bytes (type 2) or 4
// little-endian bytes (type 5). The fields written here (numbers from tensorboard's
// compat/proto event.proto, summary.proto, tensor.proto, tensor_shape.proto, types.proto):
//   Event            wall_time = 1 (double), step = 2 (int64), file_version = 3 (string),
//                    summary = 5 (Summary)
//   Summary          value = 1 (repeated Value)
//   Summary.Value    tag = 1 (string), simple_value = 2 (float), tensor = 8 (TensorProto),
//                    metadata = 9 (SummaryMetadata)
//   SummaryMetadata  plugin_data = 1 (PluginData { plugin_name = 1 (string) })
//   TensorProto      dtype = 1 (enum DataType: DT_STRING = 7), tensor_shape = 2
//                    (TensorShapeProto; empty = a scalar), string_val = 8 (repeated bytes)
// A text point is what tensorboard's text_pb() makes: a scalar string tensor whose metadata
// names the "text" plugin (its content, TextPluginData version 0, serializes to nothing).
#include "trellis/train/monitoring/tensorboard.hpp"

#include "trellis/core/error.hpp"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace trellis {

namespace {

constexpr int kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5;
constexpr std::uint64_t kDataTypeString = 7;  // tensorboard.DataType.DT_STRING

void put_varint(std::string& out, std::uint64_t v) {
  for (; v >= 0x80; v >>= 7) out.push_back(static_cast<char>((v & 0x7f) | 0x80));
  out.push_back(static_cast<char>(v));
}

void put_key(std::string& out, int field, int wire_type) {
  put_varint(out, static_cast<std::uint64_t>(field) << 3 | static_cast<std::uint64_t>(wire_type));
}

void put_little_endian(std::string& out, std::uint64_t bits, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>(bits >> (8 * i)));
}

void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_key(out, field, kBytes);
  put_varint(out, bytes.size());
  out += bytes;
}

// An Event's header: wall_time = 1 (now, seconds since the epoch), step = 2.
std::string event_header(std::int64_t step) {
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::uint64_t bits = 0;
  std::memcpy(&bits, &now, sizeof bits);
  std::string event;
  put_key(event, 1, kFixed64);
  put_little_endian(event, bits, 8);
  put_key(event, 2, kVarint);
  put_varint(event, static_cast<std::uint64_t>(step));  // negative: two's complement, 10 bytes
  return event;
}

// An Event holding a Summary (field 5) with one Value (Summary.value = 1).
std::string summary_event(const std::string& value, std::int64_t step) {
  std::string summary;
  put_bytes(summary, 1, value);
  std::string event = event_header(step);
  put_bytes(event, 5, summary);
  return event;
}

std::string host_name() {
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) != 0 || name[0] == '\0') return "localhost";
  return name.data();
}

}  // namespace

std::uint32_t crc32c(const void* data, std::size_t size) {
  static const auto table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;  // reflected
      t[i] = c;
    }
    return t;
  }();
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint32_t crc = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < size; ++i) crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

std::uint32_t masked_crc32c(const void* data, std::size_t size) {
  const std::uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir, bool enabled) {
  if (!enabled) return;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error("cannot create TensorBoard directory '" + dir + "': " + ec.message());
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  path_ = (std::filesystem::path(dir) / ("events.out.tfevents." + std::to_string(seconds) + "." +
                                         host_name() + "." + std::to_string(getpid()) + ".trellis"))
              .string();
  file_ = std::fopen(path_.c_str(), "wb");
  if (!file_)
    throw Error("cannot open TensorBoard file '" + path_ +
                "' for writing: " + std::strerror(errno));
  std::string event = event_header(0);
  put_bytes(event, 3, "brain.Event:2");  // Event.file_version
  try {
    write_event(event);
    flush();
  } catch (...) {
    std::fclose(file_);  // the destructor of a half-built writer does not run
    file_ = nullptr;
    throw;
  }
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_) std::fclose(file_);
}

void TensorBoardWriter::add_scalar(const std::string& tag, double value, std::int64_t step) {
  if (!file_) return;
  const float f = static_cast<float>(value);
  std::uint32_t bits = 0;
  std::memcpy(&bits, &f, sizeof bits);
  std::string v;
  put_bytes(v, 1, tag);     // Value.tag
  put_key(v, 2, kFixed32);  // Value.simple_value
  put_little_endian(v, bits, 4);
  write_event(summary_event(v, step));
}

void TensorBoardWriter::add_text(const std::string& tag, const std::string& markdown,
                                 std::int64_t step) {
  if (!file_) return;
  std::string tensor;
  put_key(tensor, 1, kVarint);  // TensorProto.dtype = DT_STRING
  put_varint(tensor, kDataTypeString);
  put_bytes(tensor, 2, "");        // TensorProto.tensor_shape: no dims, a scalar
  put_bytes(tensor, 8, markdown);  // TensorProto.string_val
  std::string plugin_data;
  put_bytes(plugin_data, 1, "text");  // PluginData.plugin_name
  std::string metadata;
  put_bytes(metadata, 1, plugin_data);  // SummaryMetadata.plugin_data
  std::string v;
  put_bytes(v, 1, tag);       // Value.tag
  put_bytes(v, 8, tensor);    // Value.tensor
  put_bytes(v, 9, metadata);  // Value.metadata
  write_event(summary_event(v, step));
}

void TensorBoardWriter::flush() {
  if (file_ && std::fflush(file_) != 0)
    throw Error("cannot write TensorBoard file '" + path_ + "': " + std::strerror(errno));
}

void TensorBoardWriter::write_event(const std::string& event) {
  std::string record;
  put_little_endian(record, event.size(), 8);
  const std::uint32_t length_crc = masked_crc32c(record.data(), 8);
  put_little_endian(record, length_crc, 4);
  record += event;
  put_little_endian(record, masked_crc32c(event.data(), event.size()), 4);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size())
    throw Error("cannot write TensorBoard file '" + path_ + "': " + std::strerror(errno));
}

}  // namespace trellis
