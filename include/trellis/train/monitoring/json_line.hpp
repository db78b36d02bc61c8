// Builds one JSON object on one line, for metrics.jsonl. Numbers are written with enough
// digits to round-trip a double; non-finite values become null (JSON has no NaN).
#pragma once

#include <cstdint>
#include <string>

namespace trellis {

class JsonLine {
 public:
  JsonLine& add(const std::string& key, double value);
  JsonLine& add(const std::string& key, std::int64_t value);
  JsonLine& add(const std::string& key, int value) {
    return add(key, static_cast<std::int64_t>(value));
  }
  JsonLine& add(const std::string& key, const std::string& value);
  JsonLine& add(const std::string& key, const char* value) { return add(key, std::string(value)); }
  JsonLine& add(const std::string& key, bool value);
  // A nested object: value's members under `key`.
  JsonLine& add_object(const std::string& key, const JsonLine& value);
  std::string str() const { return "{" + body_ + "}"; }

 private:
  void key(const std::string& name);
  std::string body_;
};

std::string json_escape(const std::string& text);

}  // namespace trellis
