// Run configuration: an INI file plus `--section.key=value` command-line overrides (the
// command line wins), checked against one schema of known keys before any work starts.
//
// The keys and what they accept are the config table's (config_table.hpp).
//
// RawConfig holds the merged strings (defaults from the config table, then the file, then the
// command line); TrainConfig (train_config.hpp) turns them into typed, validated values.
#pragma once

#include <iosfwd>
#include <map>
#include <string>
#include <vector>

namespace trellis {

class RawConfig {
 public:
  // Parses `config_file` (may be empty: defaults only) and the overrides, each
  // "--section.key=value" or "--section.key value". Throws ConfigError naming the file or
  // argument for unknown keys (with the closest known key), repeated keys and syntax errors.
  static RawConfig parse(const std::string& config_file, const std::vector<std::string>& overrides);
  // The same for INI text held in memory (e.g. the config stored in a weights file);
  // `source` names it in error messages.
  static RawConfig parse_text(const std::string& ini_text, const std::string& source,
                              const std::vector<std::string>& overrides);

  const std::string& get(const std::string& key) const;  // throws on a key not in the schema
  bool is_default(const std::string& key) const;
  const std::string& source() const { return source_; }

 private:
  static RawConfig parse_stream(std::istream* ini, const std::string& source,
                                const std::vector<std::string>& overrides);
  std::map<std::string, std::string> values_;
  std::map<std::string, bool> explicit_;
  std::string source_;
};

// "Did you mean ...?" for unknown keys.
std::string closest_config_key(const std::string& key);

// `text` with every byte that is not part of valid UTF-8, and every control character but
// newline and tab, written as \xNN: config errors echo what the user gave, safely.
std::string printable(const std::string& text);

}  // namespace trellis
