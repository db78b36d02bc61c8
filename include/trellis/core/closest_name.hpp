// "Did you mean ...?": the candidate nearest to a name the user mistyped (a config key, a
// command, an option), by edit distance (insertions, deletions and substitutions count 1).
#pragma once

#include <string>
#include <vector>

namespace trellis {

// The candidate with the smallest edit distance to `name` (the first one among ties); "" when
// there is none.
std::string closest_name(const std::string& name, const std::vector<std::string>& candidates);

}  // namespace trellis
