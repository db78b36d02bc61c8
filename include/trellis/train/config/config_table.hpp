// The config table: every key Trellis understands, declared once, bound to its typed field in
// TrainConfig with its default, its range or choices and its help text. Everything else is
// generated from it: the schema (`trellis train --help`, unknown-key suggestions), parsing
// and validation of each value, and the resolved config.ini.
#pragma once

#include "trellis/train/config/train_config.hpp"

#include <functional>
#include <string>
#include <vector>

namespace trellis {

struct ConfigEntry {
  const char* name;           // "section.key"
  const char* default_value;  // "" means: empty
  const char* help;
  std::string allowed;  // the values it takes, as --help and error messages say it
  // Parses `text` in the bound field's own type and stores it; ConfigError naming the key,
  // the value and what is allowed.
  std::function<void(TrainConfig&, const std::string& text)> parse;
  // The bound field's value in canonical form: parse(format(c)) stores the same value, and
  // two configs hold the same value exactly when their formats are equal.
  std::function<std::string(const TrainConfig&)> format;
};

// In the order config.ini is written.
const std::vector<ConfigEntry>& config_table();
const ConfigEntry* find_config_entry(const std::string& name);  // null for an unknown key

}  // namespace trellis
