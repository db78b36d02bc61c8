// Names and value types of the "trellis.samples" HDF5 format, shared by the reader
// (sample_dataset.hpp, which documents the format) and the writer (sample_writer.hpp).
#pragma once

#include "trellis/core/shape.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace trellis {

inline constexpr const char* kSampleFormat = "trellis.samples";
inline constexpr int kSampleFormatVersion = 1;

// Element type of /samples in the file. Readers always hand out normalised float32.
enum class SampleDType { u8, f32 };
const char* sample_dtype_name(SampleDType dtype);  // "uint8", "float32"

// x = (raw * scale - mean[c]) / std[c], c = the channel, i.e. the first axis of a sample
// ([C, H, W] images: the image channel; [D] vectors: the feature, or one value for all).
struct Normalization {
  float scale = 1.0f;             // raw value multiplier, e.g. 1/255 for uint8 pixels
  std::vector<float> mean{0.0f};  // [1] or [C]
  std::vector<float> std{1.0f};   // [1] or [C], every value > 0

  bool operator==(const Normalization& other) const {
    return scale == other.scale && mean == other.mean && std == other.std;
  }
  bool operator!=(const Normalization& other) const { return !(*this == other); }
};

// Everything about a sample file except its rows.
struct SampleFileSpec {
  Shape sample_shape;  // one sample, without the leading N: e.g. [1, 28, 28] or [D]
  SampleDType dtype = SampleDType::u8;
  int num_classes = 0;
  Normalization normalization;
  std::string source;  // optional provenance, e.g. "fashion-mnist"
};

}  // namespace trellis
