// The config keys whose values have a syntax of their own (fault.inject, precision.loss_scale,
// parallel.schedule): their parse and format functions, for the config table.
#include "trellis/train/config/config_fields.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/name_table.hpp"

#include <climits>

namespace trellis {

// fault.inject = rank:step:kind (or empty: none). The rank is checked against the world by
// TrainConfig::check_against_world().
FieldBinding fault_injection(const char* key) {
  std::vector<const char*> kinds;
  for (const auto& [name, kind] : fault_kind_names()) kinds.push_back(name);
  FieldBinding b;
  b.allowed =
      "empty, or rank:step:kind with rank >= 0, step >= 1, kind one of " + choice_list(kinds);
  b.parse = [key, allowed = b.allowed](TrainConfig& c, const std::string& t) {
    FaultConfig& f = c.fault;
    f.inject_rank = -1, f.inject_step = 0, f.inject_kind = FaultKind::none;
    if (t.empty()) return;
    const auto a = t.find(':');
    const auto z = a == std::string::npos ? a : t.find(':', a + 1);
    std::int64_t rank = -1, step = 0;
    const std::string kind = z == std::string::npos ? "" : t.substr(z + 1);
    FaultKind parsed = FaultKind::none;
    const bool known_kind = find_name(fault_kind_names(), kind, parsed);
    if (z == std::string::npos || !config_text::parse_int64(t.substr(0, a), rank) || rank < 0 ||
        rank > INT_MAX || !config_text::parse_int64(t.substr(a + 1, z - a - 1), step) || step < 1 ||
        !known_kind)
      reject_value(key, t, allowed);
    f.inject_rank = static_cast<int>(rank), f.inject_step = step, f.inject_kind = parsed;
  };
  b.format = [](const TrainConfig& c) -> std::string {
    const FaultConfig& f = c.fault;
    if (f.inject_rank < 0) return "";
    return std::to_string(f.inject_rank) + ":" + std::to_string(f.inject_step) + ":" +
           fault_kind_name(f.inject_kind);
  };
  return b;
}

// precision.loss_scale = auto | dynamic | none | a positive number (a static scale).
FieldBinding loss_scale(const char* key) {
  FieldBinding b;
  b.allowed = "auto, dynamic, none or a positive number";
  b.parse = [key, allowed = b.allowed](TrainConfig& c, const std::string& t) {
    double value = 0;
    if (t != "auto" && t != "dynamic" && t != "none" &&
        !(config_text::parse_decimal(t, value) && value > 0 && value < 3.4e38))
      reject_value(key, t, allowed);
    c.precision.loss_scale = t;
  };
  b.format = [](const TrainConfig& c) { return c.precision.loss_scale; };
  return b;
}

// parallel.schedule: names and parsing live with PipelineSchedule.
FieldBinding pipeline_schedule(const char* key) {
  FieldBinding b;
  b.allowed = "one of: 1f1b, gpipe";
  b.parse = [key, allowed = b.allowed](TrainConfig& c, const std::string& t) {
    if (t != "1f1b" && t != "gpipe") reject_value(key, t, allowed);
    c.parallel.schedule = parse_pipeline_schedule(t);
  };
  b.format = [](const TrainConfig& c) -> std::string {
    return pipeline_schedule_name(c.parallel.schedule);
  };
  return b;
}

}  // namespace trellis
