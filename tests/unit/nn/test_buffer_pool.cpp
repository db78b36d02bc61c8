// Layer buffers by role (nn/buffer_pool.hpp): ordinary allocations outside a scope; inside one,
// the k-th request of a role gets slot k of that role's pool (the same memory for every block
// built in such a scope), a larger request grows the slot, `cheap` falls back to the saved pool,
// `own` is never shared; under a census nothing is allocated and every buffer is counted.
#include "catch.hpp"

#include "trellis/core/memory_ledger.hpp"
#include "trellis/nn/buffer_pool.hpp"

using namespace trellis;
using nn::BufferRole;

TEST_CASE("buffers outside a scope are their own", "[buffer_pool]") {
  const FloatView a = nn::layer_buffer(BufferRole::saved, "trellis::nn::t.a", 10);
  const FloatView b = nn::layer_buffer(BufferRole::saved, "trellis::nn::t.b", 10);
  CHECK(a.extent(0) == 10);
  CHECK(a.data() != b.data());
  CHECK(a.label() == "trellis::nn::t.a");
}

TEST_CASE("blocks built in scopes of the same pools share their k-th buffers", "[buffer_pool]") {
  nn::BufferPool saved("trellis::recompute::t."), scratch("trellis::scratch::t.");
  auto build = [&](std::size_t grow) {
    const nn::SharedBufferScope scope(&saved, &scratch);
    std::vector<FloatView> v;
    v.push_back(nn::layer_buffer(BufferRole::saved, "x", 8));
    v.push_back(nn::layer_buffer(BufferRole::scratch, "x", 4));
    v.push_back(nn::layer_buffer(BufferRole::saved, "x", 6 + grow));
    v.push_back(nn::layer_buffer(BufferRole::cheap, "x", 3));  // no cheap pool: saved slot 2
    v.push_back(nn::layer_buffer(BufferRole::own, "x", 5));
    return v;
  };
  const auto first = build(0), second = build(0);
  CHECK(first[0].data() == second[0].data());
  CHECK(first[1].data() == second[1].data());
  CHECK(first[2].data() == second[2].data());
  CHECK(first[3].data() == second[3].data());
  CHECK(first[0].data() != first[2].data());
  CHECK(first[4].data() != second[4].data());  // own: never shared
  CHECK(first[2].extent(0) == 6);
  CHECK(saved.slots() == 3);
  CHECK(scratch.slots() == 1);
  CHECK(saved.bytes() == 4 * (8 + 6 + 3));
  // A larger request grows its slot; the earlier blocks keep the smaller one.
  const auto grown = build(4);
  CHECK(grown[2].extent(0) == 10);
  CHECK(grown[2].data() != first[2].data());
  CHECK(saved.bytes() == 4 * (8 + 10 + 3));
  // A cheap pool takes the cheap requests.
  nn::BufferPool cheap("trellis::recompute::t.cheap.");
  {
    const nn::SharedBufferScope scope(&saved, &scratch, &cheap);
    const FloatView c = nn::layer_buffer(BufferRole::cheap, "x", 3);
    CHECK(cheap.slots() == 1);
    CHECK(c.data() != first[3].data());
  }
}

TEST_CASE("a census counts buffers by category and allocates none", "[buffer_pool][memory]") {
  MemoryLedger census;
  nn::BufferPool pool("trellis::recompute::t.");
  {
    const nn::BufferCensus counting(census);
    CHECK(nn::BufferCensus::active() == &census);
    const FloatView own = nn::layer_buffer(BufferRole::saved, "trellis::nn::t.output", 100);
    const FloatView grad = nn::layer_buffer(BufferRole::scratch, "trellis::nn::t.input_grad", 50);
    CHECK(own.extent(0) == 0);
    CHECK(grad.extent(0) == 0);
    const kernels::HalfView half =
        nn::layer_half_buffer(BufferRole::saved, "trellis::autocast::t.x16", 10);
    CHECK(half.extent(0) == 0);
    for (int block = 0; block < 3; ++block) {  // three blocks share one slot: counted once
      const nn::SharedBufferScope scope(&pool, nullptr);
      const FloatView shared = nn::layer_buffer(BufferRole::saved, "x", 40);
      CHECK(shared.extent(0) == 0);
    }
  }
  CHECK(nn::BufferCensus::active() == nullptr);
  const MemorySnapshot s = census.snapshot();
  const auto at = [&](MemoryCategory c) { return s.current[static_cast<std::size_t>(c)]; };
  CHECK(at(MemoryCategory::activations) == 400);
  CHECK(at(MemoryCategory::workspace) == 200);
  CHECK(at(MemoryCategory::half_copies) == 20);
  CHECK(at(MemoryCategory::recompute) == 160);
  CHECK(pool.bytes() == 160);
}
