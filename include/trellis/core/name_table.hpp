// An enum's names, declared once as a table of (name, value) pairs, and the lookups every such
// table needs: the config table's choices, parsing with an error that lists the names, and
// the name of a value for messages and files.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace trellis {

template <class E>
using NameTable = std::vector<std::pair<const char*, E>>;

// The name of `value`, or "" when the table has none.
template <class E>
const char* name_in(const NameTable<E>& table, E value) {
  for (const auto& [name, known] : table)
    if (known == value) return name;
  return "";
}

// Whether `name` is in the table; its value in `value` when it is.
template <class E>
bool find_name(const NameTable<E>& table, const std::string& name, E& value) {
  for (const auto& [known, v] : table)
    if (name == known) return value = v, true;
  return false;
}

// "a, b, c": the names, in the table's order.
template <class E>
std::string name_list(const NameTable<E>& table) {
  std::string list;
  for (const auto& [name, value] : table) list += (list.empty() ? "" : ", ") + std::string(name);
  return list;
}

}  // namespace trellis
