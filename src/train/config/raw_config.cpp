#include "trellis/train/config/raw_config.hpp"

#include "trellis/core/closest_name.hpp"
#include "trellis/core/error.hpp"
#include "trellis/train/config/config_table.hpp"

#include <boost/program_options.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

namespace po = boost::program_options;

namespace trellis {

std::string printable(const std::string& text) {
  std::string out;
  auto escape = [&](unsigned char byte) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "\\x%02X", byte);
    out += buf;
  };
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  for (std::size_t i = 0; i < n;) {
    const unsigned char lead = bytes[i];
    if (lead < 0x80) {
      if (lead < 0x20 && lead != '\n' && lead != '\t')
        escape(lead);
      else if (lead == 0x7F)
        escape(lead);
      else
        out += static_cast<char>(lead);
      ++i;
      continue;
    }
    // Length and the allowed range of the second byte (RFC 3629: no overlongs, no
    // surrogates, nothing past U+10FFFF).
    std::size_t length = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF)
      length = 2;
    else if (lead == 0xE0)
      length = 3, lo = 0xA0;
    else if (lead >= 0xE1 && lead <= 0xEC)
      length = 3;
    else if (lead == 0xED)
      length = 3, hi = 0x9F;
    else if (lead >= 0xEE && lead <= 0xEF)
      length = 3;
    else if (lead == 0xF0)
      length = 4, lo = 0x90;
    else if (lead >= 0xF1 && lead <= 0xF3)
      length = 4;
    else if (lead == 0xF4)
      length = 4, hi = 0x8F;
    bool valid = length > 0 && i + length <= n && bytes[i + 1] >= lo && bytes[i + 1] <= hi;
    for (std::size_t k = 2; valid && k < length; ++k)
      valid = bytes[i + k] >= 0x80 && bytes[i + k] <= 0xBF;
    if (!valid) {
      escape(lead);
      ++i;
      continue;
    }
    out.append(text, i, length);
    i += length;
  }
  return out;
}

namespace {

bool find_key(const std::string& name) { return find_config_entry(name) != nullptr; }

std::string section_keys(const std::string& key) {
  const std::string section = key.substr(0, key.find('.'));
  std::string list;
  for (const ConfigEntry& k : config_table()) {
    const std::string name = k.name;
    if (name.compare(0, section.size() + 1, section + ".") == 0)
      list += (list.empty() ? "" : ", ") + name;
  }
  return list;
}

void reject_unknown(const std::string& key, const std::string& where) {
  std::string message = "unknown config key '" + key + "' in " + where + "; did you mean '" +
                        closest_config_key(key) + "'?";
  const std::string same_section = section_keys(key);
  if (!same_section.empty()) message += " Keys of this section: " + same_section;
  message += " (see `trellis train --help` for all keys)";
  throw ConfigError(printable(message));
}

}  // namespace

std::string closest_config_key(const std::string& key) {
  std::vector<std::string> names;
  for (const ConfigEntry& entry : config_table()) names.push_back(entry.name);
  return closest_name(key, names);
}

RawConfig RawConfig::parse(const std::string& config_file,
                           const std::vector<std::string>& overrides) {
  if (config_file.empty()) return parse_stream(nullptr, "", overrides);
  std::ifstream in(config_file);
  if (!in) throw ConfigError(printable("cannot open config file '" + config_file + "'"));
  return parse_stream(&in, "config file '" + config_file + "'", overrides);
}

RawConfig RawConfig::parse_text(const std::string& ini_text, const std::string& source,
                                const std::vector<std::string>& overrides) {
  std::istringstream in(ini_text);
  return parse_stream(&in, source, overrides);
}

RawConfig RawConfig::parse_stream(std::istream* ini, const std::string& source,
                                  const std::vector<std::string>& overrides) {
  RawConfig config;
  for (const ConfigEntry& key : config_table()) {
    config.values_[key.name] = key.default_value;
    config.explicit_[key.name] = false;
  }
  config.source_ = ini ? source : "(defaults)";

  // Overrides are "--section.key=value" (an empty value is allowed: --data.test= clears it).
  // A key given twice takes the later value, so wrapper scripts can append overrides.
  std::set<std::string> seen;
  for (const auto& arg : overrides) {
    const auto equals = arg.find('=');
    if (arg.rfind("--", 0) != 0 || equals == std::string::npos)
      throw ConfigError(
          printable("unexpected argument '" + arg + "': overrides are --section.key=value"));
    const std::string key = arg.substr(2, equals - 2);
    if (!find_key(key)) reject_unknown(key, "the command line");
    seen.insert(key);
    config.values_[key] = arg.substr(equals + 1);
    config.explicit_[key] = true;
  }
  try {
    po::options_description none;
    if (ini) {
      auto from_file = po::parse_config_file(*ini, none, /*allow_unregistered=*/true);
      std::set<std::string> in_file;
      for (const auto& option : from_file.options) {
        const std::string& key = option.string_key;
        if (!find_key(key)) reject_unknown(key, source);
        if (!in_file.insert(key).second)
          throw ConfigError(printable("config key '" + key + "' appears twice in " + source));
        if (seen.count(key)) continue;  // the command line wins
        config.values_[key] = option.value.empty() ? "" : option.value[0];
        config.explicit_[key] = true;
      }
    }
  } catch (const po::error& e) {
    throw ConfigError(
        printable(std::string("cannot parse configuration (") + config.source_ + "): " + e.what()));
  }
  return config;
}

const std::string& RawConfig::get(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end()) throw Error("internal: config key '" + key + "' is not in the schema");
  return it->second;
}

bool RawConfig::is_default(const std::string& key) const {
  auto it = explicit_.find(key);
  return it == explicit_.end() || !it->second;
}

}  // namespace trellis
