// Memory by category: what each rank's buffers hold, current and peak bytes, measured from
// the allocations themselves.
//
// Every Kokkos View allocation and release reports its label and size to Kokkos' tool hooks;
// MemoryTracking installs hooks that add them to a MemoryLedger, and the label says the
// category (memory_category below: one table, by the labels' prefixes). So the ledger sees
// every buffer the code allocates, with no call site to forget, and a buffer that fits no rule
// shows up as "other" rather than not at all. Only allocations in the memory space the
// kernels run in count (device memory on CUDA builds, host memory otherwise); host-side
// staging of a device build and memory outside Kokkos (MPI, oneDNN scratch, std::vector) do
// not: the ledger is what the model and its training state occupy, not the process' RSS.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

namespace trellis {

enum class MemoryCategory {
  parameters,       // fp32 parameters (the store's flat buffer)
  gradients,        // fp32 gradients (the store's, ZeRO's gradient shard)
  optimizer_state,  // moments, momentum (ZeRO-1: their shard)
  half_copies,      // 16-bit copies of parameters and operands (mixed precision)
  activations,      // what layers keep from forward for backward (outputs, pre-activations)
  workspace,        // backward scratch (input gradients, dz), library workspaces, file staging
  recompute,        // the shared buffers recomputed blocks rerun their forward into
  communication,    // gradient wire buffers, compression state, pipeline transfers
  data,             // the batch buffers the loader fills
  other,            // masks, tables, anything no rule names
};
constexpr int kMemoryCategories = 10;

// "parameters", "gradients", "optimizer_state", ... (the keys of summary.json's "memory").
const char* memory_category_name(MemoryCategory category);

// The category of a buffer by its label ("trellis::grads", "trellis::nn::h.0.attn.yr", ...).
MemoryCategory memory_category(std::string_view label);

struct MemorySnapshot {
  std::array<std::int64_t, kMemoryCategories> current{}, peak{};
  std::int64_t current_total = 0, peak_total = 0;
  // Each category's bytes at the moment the total peaked (they sum to peak_total).
  std::array<std::int64_t, kMemoryCategories> at_peak{};
};

// Thread-safe: the loader thread allocates too.
class MemoryLedger {
 public:
  void allocated(std::string_view label, std::int64_t bytes);
  void released(std::string_view label, std::int64_t bytes);
  MemorySnapshot snapshot() const;
  // Peaks from now on start at the current bytes (e.g. after start-up, to see a step's).
  void reset_peaks();

 private:
  mutable std::mutex mutex_;
  MemorySnapshot books_;
};

// Memory Kokkos does not allocate but a category should count (parameters and gradients in a
// node's MPI shared-memory window): recorded while this object lives.
class TrackedBytes {
 public:
  TrackedBytes() = default;
  TrackedBytes(std::string label, std::int64_t bytes);
  ~TrackedBytes();
  TrackedBytes(TrackedBytes&& other) noexcept;
  TrackedBytes& operator=(TrackedBytes&& other) noexcept;
  TrackedBytes(const TrackedBytes&) = delete;
  TrackedBytes& operator=(const TrackedBytes&) = delete;

 private:
  std::string label_;
  std::int64_t bytes_ = 0;
};

// The process' ledger: the tool hooks are plain function pointers, so the one they feed is a
// process-wide object (the allocator's books, as malloc's statistics are).
MemoryLedger& process_memory_ledger();

// While alive (after Kokkos::initialize), every allocation in the kernels' memory space goes
// into process_memory_ledger(). Removes its hooks when destroyed.
class MemoryTracking {
 public:
  MemoryTracking();
  ~MemoryTracking();
  MemoryTracking(const MemoryTracking&) = delete;
  MemoryTracking& operator=(const MemoryTracking&) = delete;
};

}  // namespace trellis
