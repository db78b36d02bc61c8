// TensorBoard event files: the CRC-32C, the TFRecord framing and the protobuf fields, read
// back here by hand. tests/tools/test_tensorboard_events.py reads the files of the hidden
// [.tb_write] case with the real tensorboard package.
#include "catch.hpp"

#include "unit/support/data_helpers.hpp"
#include "trellis/core/error.hpp"
#include "trellis/train/monitoring/tensorboard.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

using namespace trellis;

namespace {

std::uint64_t little_endian(const std::string& bytes, std::size_t at, int n) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i)
    v |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  return v;
}

// The events of a TFRecord file; every length and CRC is checked.
std::vector<std::string> read_records(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> events;
  for (std::size_t at = 0; at < file.size();) {
    REQUIRE(at + 12 <= file.size());
    const std::uint64_t length = little_endian(file, at, 8);
    CHECK(little_endian(file, at + 8, 4) == masked_crc32c(file.data() + at, 8));
    REQUIRE(at + 12 + length + 4 <= file.size());
    events.push_back(file.substr(at + 12, length));
    CHECK(little_endian(file, at + 12 + length, 4) == masked_crc32c(events.back().data(), length));
    at += 12 + length + 4;
  }
  return events;
}

// One protobuf field: varints and fixed values in `number`, length-delimited ones in `bytes`.
struct Field {
  int field = 0;
  int wire_type = 0;
  std::uint64_t number = 0;
  std::string bytes;
};

std::uint64_t read_varint(const std::string& m, std::size_t& at) {
  std::uint64_t v = 0;
  for (int shift = 0;; shift += 7) {
    REQUIRE(at < m.size());
    const auto byte = static_cast<unsigned char>(m[at++]);
    v |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
    if (!(byte & 0x80)) return v;
  }
}

std::vector<Field> parse(const std::string& m) {
  std::vector<Field> fields;
  for (std::size_t at = 0; at < m.size();) {
    Field f;
    const std::uint64_t key = read_varint(m, at);
    f.field = static_cast<int>(key >> 3);
    f.wire_type = static_cast<int>(key & 7);
    if (f.wire_type == 0) {
      f.number = read_varint(m, at);
    } else if (f.wire_type == 1 || f.wire_type == 5) {
      const int n = f.wire_type == 1 ? 8 : 4;
      REQUIRE(at + n <= m.size());
      f.number = little_endian(m, at, n);
      at += n;
    } else {
      REQUIRE(f.wire_type == 2);
      const std::uint64_t n = read_varint(m, at);
      REQUIRE(at + n <= m.size());
      f.bytes = m.substr(at, n);
      at += n;
    }
    fields.push_back(f);
  }
  return fields;
}

// The one field `number` of a message (REQUIREs that there is exactly one).
Field field(const std::string& message, int number) {
  std::vector<Field> found;
  for (const Field& f : parse(message))
    if (f.field == number) found.push_back(f);
  REQUIRE(found.size() == 1);
  return found[0];
}

// Event.summary (5) -> Summary.value (1): the one Value of a summary event.
std::string value_of(const std::string& event) { return field(field(event, 5).bytes, 1).bytes; }

std::string file_in(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    files.push_back(entry.path().string());
  REQUIRE(files.size() == 1);
  return files[0];
}

}  // namespace

TEST_CASE("crc32c is CRC-32C (Castagnoli) and TFRecord masks it", "[tensorboard]") {
  CHECK(crc32c("123456789", 9) == 0xE3069283u);
  CHECK(crc32c("", 0) == 0u);
  const std::uint32_t crc = 0xE3069283u;
  CHECK(masked_crc32c("123456789", 9) == ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
}

TEST_CASE("event files are framed records of Event protobufs", "[tensorboard]") {
  const std::string dir = testing::fresh_test_dir("tensorboard_events") + "/run/tb";
  std::string path;
  {
    TensorBoardWriter writer(dir, true);  // creates run/tb
    path = writer.path();
    writer.add_scalar("train/loss", 0.1, 3);
    writer.add_scalar("train/lr", -2.5, std::int64_t{1} << 40);
    writer.add_text("config", "| a | b |\n|---|---|\n| 1 | 2 |", 0);
    writer.flush();
  }
  CHECK(file_in(dir) == path);
  const std::string name = std::filesystem::path(path).filename().string();
  CHECK(name.rfind("events.out.tfevents.", 0) == 0);
  CHECK(name.size() > 8);
  CHECK(name.substr(name.size() - 8) == ".trellis");

  const std::vector<std::string> events = read_records(path);
  REQUIRE(events.size() == 4);
  // The first event: wall_time (1, double), file_version (3).
  const Field wall_time = field(events[0], 1);
  CHECK(wall_time.wire_type == 1);
  double seconds = 0;
  std::memcpy(&seconds, &wall_time.number, sizeof seconds);
  CHECK(seconds > 1.7e9);
  CHECK(field(events[0], 3).bytes == "brain.Event:2");

  // Scalars: step (2), Value.tag (1), Value.simple_value (2, float32).
  CHECK(field(events[1], 2).number == 3);
  const std::string loss = value_of(events[1]);
  CHECK(field(loss, 1).bytes == "train/loss");
  const Field simple = field(loss, 2);
  CHECK(simple.wire_type == 5);
  float f = 0;
  const auto bits = static_cast<std::uint32_t>(simple.number);
  std::memcpy(&f, &bits, sizeof f);
  CHECK(f == 0.1f);
  CHECK(field(events[2], 2).number == std::uint64_t{1} << 40);

  // Text: Value.tensor (8) a DT_STRING (7) scalar, Value.metadata (9) names the text plugin.
  const std::string text = value_of(events[3]);
  CHECK(field(text, 1).bytes == "config");
  const std::string tensor = field(text, 8).bytes;
  CHECK(field(tensor, 1).number == 7);
  CHECK(field(tensor, 2).bytes.empty());
  CHECK(field(tensor, 8).bytes == "| a | b |\n|---|---|\n| 1 | 2 |");
  const std::string plugin_data = field(field(text, 9).bytes, 1).bytes;
  CHECK(field(plugin_data, 1).bytes == "text");
}

TEST_CASE("a disabled TensorBoard writer creates nothing", "[tensorboard]") {
  const std::string dir = testing::fresh_test_dir("tensorboard_disabled") + "/tb";
  TensorBoardWriter writer(dir, false);
  writer.add_scalar("loss", 1.0, 0);
  writer.add_text("notes", "hello", 0);
  writer.flush();
  CHECK(writer.path().empty());
  CHECK(!std::filesystem::exists(dir));
}

TEST_CASE("a TensorBoard directory that cannot be made is an error naming it", "[tensorboard]") {
  const std::string blocker = testing::fresh_test_dir("tensorboard_blocked") + "/file";
  std::ofstream(blocker) << "not a directory";
  std::string message;
  try {
    TensorBoardWriter writer(blocker + "/tb", true);
  } catch (const Error& e) {
    message = e.what();
  }
  CHECK(message.find(blocker + "/tb") != std::string::npos);
}

// Run by tests/tools/test_tensorboard_events.py, which checks these values with tensorboard itself.
TEST_CASE("write a TensorBoard run into $TRELLIS_TB_OUT", "[.tb_write]") {
  const char* out = std::getenv("TRELLIS_TB_OUT");
  REQUIRE(out != nullptr);
  TensorBoardWriter writer(out, true);
  for (std::int64_t step = 0; step < 5; ++step) {
    writer.add_scalar("train/loss", 1.0 / static_cast<double>(step + 1) + 0.1, step * 10);
    writer.add_scalar("train/lr", 3e-4 * static_cast<double>(step), step * 10);
  }
  writer.add_scalar("eval/accuracy", 0.875, std::int64_t{1} << 33);
  writer.add_text("config", "**run** `gpt_small`\n\n| key | value |\n|---|---|\n| lr | 3e-4 |", 0);
  writer.add_text("notes", "unicode: \xce\xbb = 0.5, \xe2\x9c\x93", 40);
  writer.flush();
}
