// Units, ZeRO layouts and placed parameter buffers (parameter_store.hpp, zero_layout.hpp).
#include "catch.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/nn/parameter_store.hpp"
#include "trellis/parallel/zero_layout.hpp"

#include <vector>

using namespace trellis;
using trellis::nn::InitSpec;
using trellis::nn::ParameterStore;
using trellis::test::to_host;

namespace {

// embed | block 0 (w, b) | block 1 (w, b) | block 2 (w only: a smaller unit) | head
void build(ParameterStore& store, std::size_t alignment) {
  if (alignment > 0) store.set_unit_alignment(alignment);
  store.add("embed", {5, 3}, InitSpec::normal(0, 1), true);
  for (int i = 0; i < 3; ++i) {
    store.begin_unit();
    const std::string name = "h." + std::to_string(i);
    store.add(name + ".w", {4, 6}, InitSpec::uniform(-1, 1), true);
    if (i < 2) store.add(name + ".b", {4}, InitSpec::normal(0, 0.5), false);
    store.end_unit();
  }
  store.add("head", {2, 7}, InitSpec::normal(0, 1), true);
}

}  // namespace

TEST_CASE("units are padded to the alignment; the layout folds them onto two slots",
          "[nn][params][zero]") {
  ParameterStore store;
  build(store, 64);  // dp 4 x 16 floats
  store.pad_to_multiple(64);
  REQUIRE(store.units().size() == 3);
  for (const nn::UnitRange& unit : store.units()) {
    CHECK(unit.begin % 64 == 0);
    CHECK(unit.end % 64 == 0);
  }
  const ZeroLayout layout = zero_layout(store.units(), store.buffer_size());
  REQUIRE(layout.units.size() == 3);
  REQUIRE(layout.outer.size() == 2);  // embed, head
  CHECK(layout.slots == 2);
  CHECK(layout.slot_floats == 64);  // 24 + 4 floats, aligned to 64
  CHECK(layout.physical_floats() == layout.outer_floats + 2 * 64);
  CHECK(layout.physical_floats() < store.buffer_size());
  CHECK(layout.slot_begin(0) == layout.slot_begin(2));
  CHECK(layout.slot_begin(1) != layout.slot_begin(0));
}

TEST_CASE("placed parameters: units of one parity share a slot, the rest is drawn as before",
          "[nn][params][zero]") {
  ParameterStore plain, placed;
  build(plain, 64);
  build(placed, 64);
  plain.pad_to_multiple(64);
  placed.pad_to_multiple(64);
  const ZeroLayout layout = zero_layout(placed.units(), placed.buffer_size());
  placed.place(layout.placement(), layout.physical_floats(), layout.placement(),
               layout.physical_floats());
  plain.finalize(7);
  placed.finalize(7);
  CHECK(placed.params().extent(0) == layout.physical_floats());
  CHECK(placed.grads().extent(0) == layout.physical_floats());
  // Offsets stay logical; the windows of h.0 and h.2 are the same memory.
  CHECK(placed.info(placed.index("h.2.w")).offset == plain.info(plain.index("h.2.w")).offset);
  CHECK(placed.param_vector(placed.index("h.0.w")).data() ==
        placed.param_vector(placed.index("h.2.w")).data());
  CHECK(placed.grad_vector(placed.index("h.1.w")).data() !=
        placed.grad_vector(placed.index("h.0.w")).data());
  // The outer parameters are drawn as in the plain store; the units are left to their owner,
  // which draws any range of them as finalize() would have drawn the whole.
  CHECK(to_host(placed.param(placed.index("embed"))) == to_host(plain.param(plain.index("embed"))));
  CHECK(to_host(placed.param(placed.index("head"))) == to_host(plain.param(plain.index("head"))));
  CHECK_FALSE(placed.in_unit(placed.index("head")));
  CHECK(placed.in_unit(placed.index("h.1.b")));
  const std::size_t w = plain.index("h.1.w");
  const std::vector<float> whole = to_host(plain.param(w));
  FloatView part("part", 10);
  placed.initialize_range(placed.index("h.1.w"), 7, 17, kernels::Vector(part.data(), 10));
  const std::vector<float> got = to_host(part);
  CHECK(got == std::vector<float>(whole.begin() + 7, whole.begin() + 17));
}

TEST_CASE("a replica finds the original's units", "[nn][params][zero]") {
  ParameterStore store;
  build(store, 32);
  const std::vector<nn::UnitRange> units = store.units();
  store.begin_replica(0);
  store.add("embed", {5, 3}, InitSpec::normal(0, 1), true);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(store.begin_unit() == i);
    store.add("h." + std::to_string(i) + ".w", {4, 6}, InitSpec::uniform(-1, 1), true);
    store.end_unit();
  }
  store.end_replica();
  CHECK(store.units().size() == units.size());
  CHECK(store.units().back().end == units.back().end);
}
