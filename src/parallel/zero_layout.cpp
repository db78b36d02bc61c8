#include "trellis/parallel/zero_layout.hpp"

#include "trellis/core/error.hpp"

#include <algorithm>

namespace trellis {

ZeroLayout zero_layout(const std::vector<nn::UnitRange>& units, std::size_t buffer_size) {
  ZeroLayout layout;
  std::size_t cursor = 0;
  for (const nn::UnitRange& unit : units) {
    TRELLIS_REQUIRE(unit.begin >= cursor && unit.end >= unit.begin && unit.end <= buffer_size,
                    "zero_layout: units out of order or beyond the buffer");
    if (unit.end == unit.begin) {
      layout.layout_unit.push_back(-1);
      continue;
    }
    if (unit.begin > cursor) layout.outer.push_back({cursor, unit.begin});
    layout.layout_unit.push_back(static_cast<long>(layout.units.size()));
    layout.units.push_back(unit);
    layout.slot_floats = std::max(layout.slot_floats, unit.end - unit.begin);
    cursor = unit.end;
  }
  if (buffer_size > cursor) layout.outer.push_back({cursor, buffer_size});
  for (const nn::UnitRange& range : layout.outer) {
    layout.outer_at.push_back(layout.outer_floats);
    layout.outer_floats += range.end - range.begin;
  }
  layout.slots = std::min<std::size_t>(2, layout.units.size());
  return layout;
}

std::vector<nn::Placement> ZeroLayout::placement() const {
  std::vector<nn::Placement> placed;
  for (std::size_t r = 0; r < outer.size(); ++r)
    placed.push_back({outer[r].begin, outer[r].end, outer_at[r]});
  for (std::size_t k = 0; k < units.size(); ++k)
    placed.push_back({units[k].begin, units[k].end, slot_begin(k)});
  return placed;
}

}  // namespace trellis
