// TensorBoard event files, written by hand (no TensorFlow or protobuf library): rank 0 writes
// events.out.tfevents.<unix seconds>.<hostname>.<pid>.trellis into the run directory, which
// TensorBoard's scalar and text dashboards read. src/train/tensorboard.cpp describes the format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace trellis {

class TensorBoardWriter {
 public:
  // Creates `dir` (and its parents) and a new event file in it when `enabled`, and writes the
  // file-version event first; otherwise every call is a no-op and nothing is created.
  TensorBoardWriter(const std::string& dir, bool enabled);
  ~TensorBoardWriter();  // flushes and closes
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // One scalar point (stored as float32, as TensorBoard's own scalars are).
  void add_scalar(const std::string& tag, double value, std::int64_t step);
  // One text point for the text dashboard, rendered as markdown.
  void add_text(const std::string& tag, const std::string& markdown, std::int64_t step);
  // Events are buffered; flush() hands them to the OS (call it after each logged step).
  void flush();

  const std::string& path() const { return path_; }  // the event file; empty when disabled

 private:
  void write_event(const std::string& event);

  std::FILE* file_ = nullptr;
  std::string path_;
};

// CRC-32C (Castagnoli), the checksum of TFRecord framing: crc32c("123456789") == 0xE3069283.
std::uint32_t crc32c(const void* data, std::size_t size);
// The masked form TFRecord stores: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
std::uint32_t masked_crc32c(const void* data, std::size_t size);

}  // namespace trellis
