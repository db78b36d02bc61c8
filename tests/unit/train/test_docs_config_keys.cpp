// docs/configuration.md lists every config key with its default, by section: the table there
// must say what the config table (train/config/config_table.cpp) says, so the page stays true.
#include "trellis/train/config/config_table.hpp"

#include "catch.hpp"

#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>

namespace {

// "section.key" -> default, from the rows "| `section` | ... | `key` (default), ... | ... |".
std::map<std::string, std::string> documented_keys(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  std::map<std::string, std::string> keys;
  const std::regex row(R"(^\| `([a-z_]+)` \|[^|]*\| (.*) \|[^|]*\|\s*$)");
  const std::regex key(R"(`([a-z_0-9]+)` \(([^)]*)\))");
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    const std::string section = m[1], list = m[2];
    for (auto it = std::sregex_iterator(list.begin(), list.end(), key);
         it != std::sregex_iterator(); ++it) {
      const std::string value = (*it)[2];
      keys[section + "." + (*it)[1].str()] = value == "empty" ? "" : value;
    }
  }
  return keys;
}

}  // namespace

TEST_CASE("docs/configuration.md lists every config key with its default", "[config][docs]") {
  // $TRELLIS_SRC when ctest names the source tree, else the tree this file is in.
  const char* src = std::getenv("TRELLIS_SRC");
  const std::string here = __FILE__;
  const std::string root =
      src != nullptr && *src != '\0' ? src : here.substr(0, here.rfind("/tests/"));
  const std::map<std::string, std::string> documented =
      documented_keys(root + "/docs/configuration.md");
  std::size_t listed = 0;
  for (const trellis::ConfigEntry& entry : trellis::config_table()) {
    INFO(entry.name);
    const auto it = documented.find(entry.name);
    CHECK(it != documented.end());
    if (it == documented.end()) continue;
    CHECK(it->second == entry.default_value);
    ++listed;
  }
  CHECK(documented.size() == listed);  // no key the table does not have
}
