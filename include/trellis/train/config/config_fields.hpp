// Builders of the config table's typed bindings: each turns a field accessor plus its range
// or choices into the parse/format pair of a ConfigEntry. Values are validated in the field's
// own type (an int key rejects what does not fit an int), numbers must be decimal, and every
// error message names the key, the value (non-UTF-8 bytes escaped) and what is allowed.
#pragma once

#include "trellis/train/config/config_table.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace trellis {

struct FieldBinding {
  std::string allowed;  // "an integer >= 1", "one of: a, b": for --help and error messages
  std::function<void(TrainConfig&, const std::string&)> parse;  // (config, text); key bound
  std::function<std::string(const TrainConfig&)> format;
};

// Throws ConfigError("config key <key> = '<text>': expected <expected>").
[[noreturn]] void reject_value(const std::string& key, const std::string& text,
                               const std::string& expected);

namespace config_text {
// Strict decimal parsing: no hex, no blanks, no nan/inf. False when the text is no such number
// or does not fit the result type.
bool parse_int64(const std::string& text, std::int64_t& value);
bool parse_uint64(const std::string& text, std::uint64_t& value);
bool parse_decimal(const std::string& text, double& value);    // finite only
std::string format_real(double value, bool single_precision);  // shortest round-trip form
std::string format_int_list(const std::vector<int>& values);   // "256,128"
}  // namespace config_text

// An accessor: [](TrainConfig& c) -> T& { return c.section.field; }.
template <class T>
using FieldAccess = T& (*)(TrainConfig&);

// The format side reads through the same accessor; the accessor never modifies.
template <class T>
const T& read_field(FieldAccess<T> access, const TrainConfig& config) {
  return access(const_cast<TrainConfig&>(config));
}

// "an integer >= lo", and "and <= hi" unless hi is the 64-bit maximum.
std::string integer_expectation(const std::string& lo, const std::string& hi, bool bounded);

// Keeps a parameter out of template argument deduction: the accessor alone decides T.
template <class T>
struct NoDeduce {
  using type = T;
};

template <class T>
FieldBinding integer(const char* key, FieldAccess<T> access, typename NoDeduce<T>::type lo,
                     typename NoDeduce<T>::type hi = std::numeric_limits<T>::max()) {
  static_assert(std::is_integral<T>::value, "integer() binds integer fields");
  FieldBinding b;
  const bool bounded = sizeof(T) < 8 || hi != std::numeric_limits<T>::max();
  b.allowed = integer_expectation(std::to_string(lo), std::to_string(hi), bounded);
  b.parse = [=, allowed = b.allowed](TrainConfig& c, const std::string& text) {
    if (std::is_signed<T>::value) {
      std::int64_t v = 0;
      if (config_text::parse_int64(text, v) && v >= static_cast<std::int64_t>(lo) &&
          v <= static_cast<std::int64_t>(hi))
        return void(access(c) = static_cast<T>(v));
    } else {
      std::uint64_t v = 0;
      if (config_text::parse_uint64(text, v) && v >= static_cast<std::uint64_t>(lo) &&
          v <= static_cast<std::uint64_t>(hi))
        return void(access(c) = static_cast<T>(v));
    }
    reject_value(key, text, allowed);
  };
  b.format = [=](const TrainConfig& c) { return std::to_string(read_field(access, c)); };
  return b;
}

template <class T>
FieldBinding real(const char* key, FieldAccess<T> access, double lo, double hi) {
  static_assert(std::is_floating_point<T>::value, "real() binds float and double fields");
  FieldBinding b;
  b.allowed = "a decimal number in [" + config_text::format_real(lo, false) + ", " +
              config_text::format_real(hi, false) + "]";
  b.parse = [=, allowed = b.allowed](TrainConfig& c, const std::string& text) {
    double v = 0;
    if (!config_text::parse_decimal(text, v) || !(v >= lo && v <= hi))
      reject_value(key, text, allowed);
    access(c) = static_cast<T>(v);
  };
  b.format = [=](const TrainConfig& c) {
    return config_text::format_real(read_field(access, c), std::is_same<T, float>::value);
  };
  return b;
}

FieldBinding boolean(const char* key, FieldAccess<bool> access);
FieldBinding text(const char* key, FieldAccess<std::string> access, bool allow_empty = true);
FieldBinding int_list(const char* key, FieldAccess<std::vector<int>> access, int lo, int hi);
// A string field restricted to `choices`.
FieldBinding choice(const char* key, FieldAccess<std::string> access,
                    std::vector<const char*> choices);

std::string choice_list(const std::vector<const char*>& names);  // "a, b, c"

// A field of any type spelled by names (an enum, or a bool like data.cache = none | memory).
template <class T>
FieldBinding named(const char* key, FieldAccess<T> access,
                   typename NoDeduce<std::vector<std::pair<const char*, T>>>::type names) {
  FieldBinding b;
  std::vector<const char*> list;
  for (const auto& entry : names) list.push_back(entry.first);
  b.allowed = "one of: " + choice_list(list);
  b.parse = [=, allowed = b.allowed](TrainConfig& c, const std::string& text) {
    for (const auto& [name, value] : names)
      if (text == name) return void(access(c) = value);
    reject_value(key, text, allowed);
  };
  b.format = [=](const TrainConfig& c) -> std::string {
    for (const auto& [name, value] : names)
      if (read_field(access, c) == value) return name;
    return "?";
  };
  return b;
}

// Keys with a syntax of their own (special_fields.cpp).
FieldBinding fault_injection(const char* key);    // rank:step:kind, or empty
FieldBinding loss_scale(const char* key);         // auto | dynamic | none | a positive number
FieldBinding pipeline_schedule(const char* key);  // a PipelineSchedule name

}  // namespace trellis
