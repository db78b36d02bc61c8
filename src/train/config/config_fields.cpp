#include "trellis/train/config/config_fields.hpp"

#include "trellis/core/error.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace trellis {

void reject_value(const std::string& key, const std::string& text, const std::string& expected) {
  throw ConfigError(printable("config key " + key + " = '" + text + "': expected " + expected));
}

std::string integer_expectation(const std::string& lo, const std::string& hi, bool bounded) {
  return "an integer >= " + lo + (bounded ? " and <= " + hi : "");
}

std::string choice_list(const std::vector<const char*>& names) {
  std::string out;
  for (const char* name : names) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

namespace config_text {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// [+-]?digits: what strtoll would read, minus its leniency (blanks, trailing junk).
bool plain_integer(const std::string& text) {
  std::size_t i = (!text.empty() && (text[0] == '+' || text[0] == '-')) ? 1 : 0;
  if (i == text.size()) return false;
  for (; i < text.size(); ++i)
    if (!is_digit(text[i])) return false;
  return true;
}

// [+-]? (digits [. digits?] | . digits) ([eE] [+-]? digits)?: strtod also takes hex, inf, nan.
bool plain_decimal(const std::string& text) {
  std::size_t i = (!text.empty() && (text[0] == '+' || text[0] == '-')) ? 1 : 0;
  std::size_t digits = 0;
  while (i < text.size() && is_digit(text[i])) ++i, ++digits;
  if (i < text.size() && text[i] == '.') {
    ++i;
    while (i < text.size() && is_digit(text[i])) ++i, ++digits;
  }
  if (digits == 0) return false;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    std::size_t exponent_digits = 0;
    while (i < text.size() && is_digit(text[i])) ++i, ++exponent_digits;
    if (exponent_digits == 0) return false;
  }
  return i == text.size();
}

}  // namespace

bool parse_int64(const std::string& text, std::int64_t& value) {
  if (!plain_integer(text)) return false;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), nullptr, 10);
  if (errno == ERANGE) return false;
  value = v;
  return true;
}

bool parse_uint64(const std::string& text, std::uint64_t& value) {
  if (!plain_integer(text) || text[0] == '-') return false;
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
  if (errno == ERANGE) return false;
  value = v;
  return true;
}

bool parse_decimal(const std::string& text, double& value) {
  if (!plain_decimal(text)) return false;
  const double v = std::strtod(text.c_str(), nullptr);
  if (!std::isfinite(v)) return false;
  value = v;
  return true;
}

std::string format_real(double value, bool single_precision) {
  char buf[64];
  for (int precision = 6; precision <= 17; ++precision) {  // 6: "30", not "3e+01"
    std::snprintf(buf, sizeof(buf), "%.*g", precision, value);
    const double back = std::strtod(buf, nullptr);
    if (single_precision ? static_cast<float>(back) == static_cast<float>(value) : back == value)
      break;
  }
  return buf;
}

std::string format_int_list(const std::vector<int>& values) {
  std::string out;
  for (int v : values) out += (out.empty() ? "" : ",") + std::to_string(v);
  return out;
}

}  // namespace config_text

FieldBinding boolean(const char* key, FieldAccess<bool> access) {
  FieldBinding b;
  b.allowed = "true or false";
  b.parse = [=](TrainConfig& c, const std::string& t) {
    if (t == "true" || t == "1" || t == "yes" || t == "on") return void(access(c) = true);
    if (t == "false" || t == "0" || t == "no" || t == "off") return void(access(c) = false);
    reject_value(key, t, "true or false");  // = b.allowed
  };
  b.format = [=](const TrainConfig& c) -> std::string {
    return read_field(access, c) ? "true" : "false";
  };
  return b;
}

FieldBinding text(const char* key, FieldAccess<std::string> access, bool allow_empty) {
  FieldBinding b;
  b.allowed = allow_empty ? "text, may be empty" : "non-empty text";
  b.parse = [=, allowed = b.allowed](TrainConfig& c, const std::string& t) {
    if (!allow_empty && t.empty()) reject_value(key, t, allowed);
    access(c) = t;
  };
  b.format = [=](const TrainConfig& c) { return read_field(access, c); };
  return b;
}

FieldBinding int_list(const char* key, FieldAccess<std::vector<int>> access, int lo, int hi) {
  FieldBinding b;
  b.allowed = "a comma-separated list of integers >= " + std::to_string(lo) +
              " and <= " + std::to_string(hi);
  b.parse = [=, expected = b.allowed](TrainConfig& c, const std::string& t) {
    std::vector<int> values;
    std::stringstream in(t);
    std::string item;
    while (std::getline(in, item, ',')) {
      const auto first = item.find_first_not_of(" \t");
      const auto last = item.find_last_not_of(" \t");
      if (first == std::string::npos) reject_value(key, t, expected);
      std::int64_t v = 0;
      if (!config_text::parse_int64(item.substr(first, last - first + 1), v) || v < lo || v > hi)
        reject_value(key, t, expected);
      values.push_back(static_cast<int>(v));
    }
    if (!t.empty() && t.back() == ',') reject_value(key, t, expected);
    access(c) = values;
  };
  b.format = [=](const TrainConfig& c) {
    return config_text::format_int_list(read_field(access, c));
  };
  return b;
}

FieldBinding choice(const char* key, FieldAccess<std::string> access,
                    std::vector<const char*> choices) {
  FieldBinding b;
  b.allowed = "one of: " + choice_list(choices);
  b.parse = [=, allowed = b.allowed](TrainConfig& c, const std::string& t) {
    for (const char* name : choices)
      if (t == name) return void(access(c) = t);
    reject_value(key, t, allowed);
  };
  b.format = [=](const TrainConfig& c) { return read_field(access, c); };
  return b;
}

}  // namespace trellis
