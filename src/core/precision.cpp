#include "trellis/core/precision.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/name_table.hpp"

namespace trellis {

const std::vector<std::pair<const char*, Precision>>& precision_names() {
  static const std::vector<std::pair<const char*, Precision>> names = {
      {"fp32", Precision::fp32}, {"bf16", Precision::bf16}, {"fp16", Precision::fp16}};
  return names;
}

Precision parse_precision(const std::string& name, const char* key) {
  Precision p{};
  if (!find_name(precision_names(), name, p))
    throw ConfigError(std::string(key) + " = \"" + name + "\" (expected one of " +
                      name_list(precision_names()) + ")");
  return p;
}

const char* precision_name(Precision p) { return name_in(precision_names(), p); }

}  // namespace trellis
