#include "trellis/data/sample_format.hpp"

namespace trellis {

const char* sample_dtype_name(SampleDType dtype) {
  return dtype == SampleDType::u8 ? "uint8" : "float32";
}

}  // namespace trellis
