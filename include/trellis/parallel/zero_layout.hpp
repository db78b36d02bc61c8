// ZeroLayout: where ZeRO-2 keeps the gradients and ZeRO-3 also the parameters.
//
// The store's logical flat space [buffer_size] is cut into the units the models marked (each
// transformer or residual block, nn/block_stack.hpp) and the ranges between them ("outer":
// embeddings, final norm, head), every one a multiple of dp x kAlignment floats once the
// store's unit alignment is set. The physical buffer keeps the outer ranges whole, packed, and
// two slots of the largest unit's size; unit k lives in slot k mod 2 while it is used:
//
//   logical   | outer 0 | unit 0 | unit 1 | unit 2 | ... | unit K-1 | outer 1 |
//   physical  | outer 0 | outer 1 | slot 0 [S] | slot 1 [S] |        S = max unit size
//
// Two slots, because the exchange fills the next unit's slot (prefetch) while the current one
// computes. One unit: one slot. No unit: the physical buffer is the logical one.
#pragma once

#include "trellis/nn/parameter_store.hpp"

#include <cstddef>
#include <vector>

namespace trellis {

struct ZeroLayout {
  std::vector<nn::UnitRange> outer;   // logical ranges in no unit, in order
  std::vector<nn::UnitRange> units;   // the non-empty units, in order
  std::vector<long> layout_unit;      // per store unit: its index in `units`, -1 if empty
  std::vector<std::size_t> outer_at;  // physical begin of each outer range
  std::size_t outer_floats = 0;       // sum of the outer ranges
  std::size_t slot_floats = 0;        // S: the largest unit
  std::size_t slots = 0;              // min(2, units)

  std::size_t physical_floats() const { return outer_floats + slots * slot_floats; }
  // Physical begin of the slot layout unit k lives in.
  std::size_t slot_begin(std::size_t k) const { return outer_floats + (k % slots) * slot_floats; }
  // For ParameterStore::place(): every outer range and every unit, logical -> physical.
  std::vector<nn::Placement> placement() const;
};

// units: the store's (ParameterStore::units()); buffer_size: its padded logical size.
ZeroLayout zero_layout(const std::vector<nn::UnitRange>& units, std::size_t buffer_size);

}  // namespace trellis
