#include "trellis/core/precision.hpp"

#include "trellis/core/error.hpp"

namespace trellis {

const std::vector<std::pair<const char*, Precision>>& precision_names() {
  static const std::vector<std::pair<const char*, Precision>> names = {
      {"fp32", Precision::fp32}, {"bf16", Precision::bf16}, {"fp16", Precision::fp16}};
  return names;
}

Precision parse_precision(const std::string& name, const char* key) {
  std::string allowed;
  for (const auto& [known, value] : precision_names()) {
    if (name == known) return value;
    allowed += (allowed.empty() ? "" : ", ") + std::string(known);
  }
  throw ConfigError(std::string(key) + " = \"" + name + "\" (expected one of " + allowed + ")");
}

const char* precision_name(Precision p) {
  for (const auto& [name, value] : precision_names())
    if (value == p) return name;
  return "fp32";
}

}  // namespace trellis
