#include "trellis/core/kokkos_types.hpp"
#include "trellis/core/memory_ledger.hpp"

#include <catch2/catch.hpp>

#include <Kokkos_Core.hpp>

using trellis::MemoryCategory;
using trellis::MemoryLedger;
using trellis::MemorySnapshot;

namespace {

std::int64_t of(const std::array<std::int64_t, trellis::kMemoryCategories>& bytes,
                MemoryCategory c) {
  return bytes[static_cast<std::size_t>(c)];
}

}  // namespace

TEST_CASE("memory categories follow the buffers' labels", "[memory]") {
  using trellis::memory_category;
  CHECK(memory_category("trellis::params") == MemoryCategory::parameters);
  CHECK(memory_category("trellis::grads") == MemoryCategory::gradients);
  CHECK(memory_category("trellis::zero1::shard_grads") == MemoryCategory::gradients);
  CHECK(memory_category("trellis::adam::exp_avg_sq") == MemoryCategory::optimizer_state);
  CHECK(memory_category("trellis::sgd::momentum_buffer") == MemoryCategory::optimizer_state);
  CHECK(memory_category("trellis::compute_params_16") == MemoryCategory::half_copies);
  CHECK(memory_category("trellis::autocast::h.0.mlp.c_fc.x16") == MemoryCategory::half_copies);
  CHECK(memory_category("trellis::grad_wire_shard") == MemoryCategory::communication);
  CHECK(memory_category("trellis::pipeline::input0") == MemoryCategory::communication);
  CHECK(memory_category("trellis::batch::tokens") == MemoryCategory::data);
  // A layer's buffers: what backward reads is an activation, what it writes is workspace.
  CHECK(memory_category("trellis::nn::h.0.attn.yr") == MemoryCategory::activations);
  CHECK(memory_category("trellis::nn::h.0.mlp.c_fc.pre_activation") == MemoryCategory::activations);
  CHECK(memory_category("trellis::nn::h.0.ln_1.output") == MemoryCategory::activations);
  CHECK(memory_category("trellis::nn::h.0.ln_1.input_grad") == MemoryCategory::workspace);
  CHECK(memory_category("trellis::nn::h.0.attn.dqkv") == MemoryCategory::workspace);
  CHECK(memory_category("trellis::nn::rope.cos") == MemoryCategory::other);
  // The blocks' shared pools (nn/buffer_pool.hpp) and a recomputed group's checkpoint.
  CHECK(memory_category("trellis::scratch::h.1.3") == MemoryCategory::workspace);
  CHECK(memory_category("trellis::recompute::h.0.12") == MemoryCategory::recompute);
  CHECK(memory_category("trellis::nn::h.group0.checkpoint") == MemoryCategory::activations);
  CHECK(memory_category("trellis::decay_mask") == MemoryCategory::other);
  CHECK(memory_category("trellis::peak::a") == MemoryCategory::workspace);
  // Kokkos' own scratch (Serial's team scratch here) is a run-time workspace; no rule: other.
  CHECK(memory_category("Kokkos::Serial::scratch_mem") == MemoryCategory::workspace);
  CHECK(memory_category("Kokkos::InternalScratch") == MemoryCategory::workspace);
  CHECK(memory_category("somebody::else") == MemoryCategory::other);
  CHECK(std::string(trellis::memory_category_name(MemoryCategory::optimizer_state)) ==
        "optimizer_state");
}

TEST_CASE("the ledger keeps current and peak bytes per category and at the total's peak",
          "[memory]") {
  MemoryLedger ledger;
  ledger.allocated("trellis::params", 100);
  ledger.allocated("trellis::nn::fc1.output", 40);
  ledger.released("trellis::nn::fc1.output", 40);
  ledger.allocated("trellis::nn::fc1.input_grad", 30);
  MemorySnapshot s = ledger.snapshot();
  CHECK(of(s.current, MemoryCategory::parameters) == 100);
  CHECK(of(s.current, MemoryCategory::activations) == 0);
  CHECK(of(s.peak, MemoryCategory::activations) == 40);
  CHECK(of(s.peak, MemoryCategory::workspace) == 30);
  CHECK(s.current_total == 130);
  CHECK(s.peak_total == 140);
  CHECK(of(s.at_peak, MemoryCategory::activations) == 40);  // the peak was params + output
  CHECK(of(s.at_peak, MemoryCategory::workspace) == 0);

  ledger.reset_peaks();
  s = ledger.snapshot();
  CHECK(s.peak_total == 130);
  CHECK(of(s.peak, MemoryCategory::activations) == 0);
}

TEST_CASE("memory tracking sees every View of the kernels' memory space, by label", "[memory]") {
  trellis::MemoryLedger& ledger = trellis::process_memory_ledger();
  const trellis::MemoryTracking tracking;
  const MemorySnapshot before = ledger.snapshot();
  {
    const trellis::FloatView grads("trellis::grads", 1000);
    const trellis::FloatView moment("trellis::adam::exp_avg", 500);
    const MemorySnapshot during = ledger.snapshot();
    CHECK(of(during.current, MemoryCategory::gradients) -
              of(before.current, MemoryCategory::gradients) ==
          4000);
    CHECK(of(during.current, MemoryCategory::optimizer_state) -
              of(before.current, MemoryCategory::optimizer_state) ==
          2000);
    CHECK(during.current_total - before.current_total == 6000);
  }
  const MemorySnapshot after = ledger.snapshot();
  CHECK(after.current_total == before.current_total);  // released with the Views
  CHECK(after.peak_total >= before.current_total + 6000);
  {
    const trellis::TrackedBytes shared("trellis::params", 64);  // e.g. an MPI window
    CHECK(ledger.snapshot().current_total == before.current_total + 64);
  }
  CHECK(ledger.snapshot().current_total == before.current_total);
}
