#include "trellis/train/monitoring/json_line.hpp"

#include <cmath>
#include <cstdio>

namespace trellis {

std::string json_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

void JsonLine::key(const std::string& name) {
  if (!body_.empty()) body_ += ", ";
  body_ += "\"" + json_escape(name) + "\": ";
}

JsonLine& JsonLine::add(const std::string& name, double value) {
  key(name);
  if (!std::isfinite(value)) {
    body_ += "null";
  } else {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.17g", value);
    body_ += buf;
  }
  return *this;
}

JsonLine& JsonLine::add(const std::string& name, std::int64_t value) {
  key(name);
  body_ += std::to_string(value);
  return *this;
}

JsonLine& JsonLine::add(const std::string& name, const std::string& value) {
  key(name);
  body_ += "\"" + json_escape(value) + "\"";
  return *this;
}

JsonLine& JsonLine::add(const std::string& name, bool value) {
  key(name);
  body_ += value ? "true" : "false";
  return *this;
}

JsonLine& JsonLine::add_object(const std::string& name, const JsonLine& value) {
  key(name);
  body_ += value.str();
  return *this;
}

}  // namespace trellis
