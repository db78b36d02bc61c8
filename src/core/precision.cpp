#include "trellis/core/precision.hpp"

#include "trellis/core/error.hpp"

namespace trellis {

Precision parse_precision(const std::string& name, const char* key) {
  if (name == "fp32") return Precision::fp32;
  if (name == "bf16") return Precision::bf16;
  if (name == "fp16") return Precision::fp16;
  throw ConfigError(std::string(key) + " = \"" + name + "\" (expected fp32, bf16 or fp16)");
}

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::bf16:
      return "bf16";
    case Precision::fp16:
      return "fp16";
    default:
      return "fp32";
  }
}

}  // namespace trellis
