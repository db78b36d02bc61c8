// Small text helpers shared by the serial and MPI tests: reading a file whole, looking for a
// phrase, and the message of the exception a call throws.
#pragma once

#include <fstream>
#include <functional>
#include <iterator>
#include <string>

namespace trellis::test {

inline std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The what() of the E that f throws; `none` when it throws nothing.
template <class E>
std::string message_of(const std::function<void()>& f, const std::string& none = "") {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return none;
}

}  // namespace trellis::test
