#include "trellis/core/memory_ledger.hpp"

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstring>
#include <utility>

namespace trellis {

namespace {

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// A layer's buffer "trellis::nn::<layer>.<what>": what backward reads later is an activation;
// what backward (or one forward call: gemm_out) writes and forgets is workspace.
MemoryCategory layer_buffer_category(std::string_view what) {
  static constexpr std::string_view kBackwardScratch[] = {
      "input_grad", "dz",      "dh",         "dqkv",   "delta",
      "dgate_up",   "dlogits", "db_discard", "im2col", "gemm_out"};
  for (std::string_view name : kBackwardScratch)
    if (what == name) return MemoryCategory::workspace;
  return MemoryCategory::activations;
}

struct PrefixRule {
  std::string_view prefix;
  MemoryCategory category;
};

// First match wins: the more specific prefixes come first.
constexpr PrefixRule kRules[] = {
    {"trellis::params", MemoryCategory::parameters},
    {"trellis::grads", MemoryCategory::gradients},
    {"trellis::zero1::shard_grads", MemoryCategory::gradients},
    {"trellis::zero3::shard_params", MemoryCategory::parameters},
    {"trellis::zero::received", MemoryCategory::communication},  // per-unit reduce-scatters
    {"trellis::adam::", MemoryCategory::optimizer_state},
    {"trellis::sgd::", MemoryCategory::optimizer_state},
    {"trellis::rmsprop::", MemoryCategory::optimizer_state},
    {"trellis::compute_params", MemoryCategory::half_copies},  // and compute_params_16
    {"trellis::autocast::", MemoryCategory::half_copies},
    {"trellis::grad_wire", MemoryCategory::communication},     // and grad_wire_shard
    {"trellis::param_wire::", MemoryCategory::communication},  // ZeRO-3's 16-bit gathers
    {"trellis::powersgd::", MemoryCategory::communication},
    {"trellis::pipeline::", MemoryCategory::communication},
    {"trellis::batch::", MemoryCategory::data},
    {"trellis::kernels::", MemoryCategory::workspace},  // library workspaces (cuDNN)
    {"Kokkos::", MemoryCategory::workspace},  // Kokkos' own team scratch, sized at run time
    {"trellis::tensor_file::", MemoryCategory::workspace},  // checkpoint staging
    {"trellis::peak::", MemoryCategory::workspace},         // the start-up GEMM measurement
    {"trellis::nn::rope.", MemoryCategory::other},          // the rotary tables, shared
    {"trellis::scratch::", MemoryCategory::workspace},      // blocks' shared backward scratch
    {"trellis::recompute::", MemoryCategory::recompute},    // recomputed blocks' activations
};

}  // namespace

const char* memory_category_name(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::parameters:
      return "parameters";
    case MemoryCategory::gradients:
      return "gradients";
    case MemoryCategory::optimizer_state:
      return "optimizer_state";
    case MemoryCategory::half_copies:
      return "half_copies";
    case MemoryCategory::activations:
      return "activations";
    case MemoryCategory::workspace:
      return "workspace";
    case MemoryCategory::recompute:
      return "recompute";
    case MemoryCategory::communication:
      return "communication";
    case MemoryCategory::data:
      return "data";
    case MemoryCategory::other:
      break;
  }
  return "other";
}

MemoryCategory memory_category(std::string_view label) {
  for (const PrefixRule& rule : kRules)
    if (starts_with(label, rule.prefix)) return rule.category;
  static constexpr std::string_view kLayer = "trellis::nn::";
  if (starts_with(label, kLayer)) {
    const std::string_view rest = label.substr(kLayer.size());
    const std::size_t dot = rest.rfind('.');
    return dot == std::string_view::npos ? MemoryCategory::other
                                         : layer_buffer_category(rest.substr(dot + 1));
  }
  return MemoryCategory::other;
}

void MemoryLedger::allocated(std::string_view label, std::int64_t bytes) {
  const auto c = static_cast<std::size_t>(memory_category(label));
  const std::lock_guard<std::mutex> lock(mutex_);
  MemorySnapshot& b = books_;
  b.current[c] += bytes;
  b.peak[c] = std::max(b.peak[c], b.current[c]);
  b.current_total += bytes;
  if (b.current_total > b.peak_total) {
    b.peak_total = b.current_total;
    b.at_peak = b.current;
  }
}

void MemoryLedger::released(std::string_view label, std::int64_t bytes) {
  const auto c = static_cast<std::size_t>(memory_category(label));
  const std::lock_guard<std::mutex> lock(mutex_);
  books_.current[c] -= bytes;
  books_.current_total -= bytes;
}

MemorySnapshot MemoryLedger::snapshot() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return books_;
}

void MemoryLedger::reset_peaks() {
  const std::lock_guard<std::mutex> lock(mutex_);
  books_.peak = books_.current;
  books_.peak_total = books_.current_total;
  books_.at_peak = books_.current;
}

MemoryLedger& process_memory_ledger() {
  static MemoryLedger ledger;
  return ledger;
}

TrackedBytes::TrackedBytes(std::string label, std::int64_t bytes)
    : label_(std::move(label)), bytes_(bytes) {
  process_memory_ledger().allocated(label_, bytes_);
}

TrackedBytes::~TrackedBytes() {
  if (bytes_ != 0) process_memory_ledger().released(label_, bytes_);
}

TrackedBytes::TrackedBytes(TrackedBytes&& other) noexcept
    : label_(std::move(other.label_)), bytes_(std::exchange(other.bytes_, 0)) {}

TrackedBytes& TrackedBytes::operator=(TrackedBytes&& other) noexcept {
  if (this != &other) {
    if (bytes_ != 0) process_memory_ledger().released(label_, bytes_);
    label_ = std::move(other.label_);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

namespace {

// The memory space the kernels run in: its allocations are the ones a device runs out of.
bool counted_space(const Kokkos::Tools::SpaceHandle& space) {
  return std::strcmp(space.name, Kokkos::DefaultExecutionSpace::memory_space::name()) == 0;
}

void on_allocate(Kokkos::Tools::SpaceHandle space, const char* label, const void*,
                 std::uint64_t bytes) {
  if (counted_space(space))
    process_memory_ledger().allocated(label, static_cast<std::int64_t>(bytes));
}

void on_release(Kokkos::Tools::SpaceHandle space, const char* label, const void*,
                std::uint64_t bytes) {
  if (counted_space(space))
    process_memory_ledger().released(label, static_cast<std::int64_t>(bytes));
}

}  // namespace

MemoryTracking::MemoryTracking() {
  Kokkos::Tools::Experimental::set_allocate_data_callback(&on_allocate);
  Kokkos::Tools::Experimental::set_deallocate_data_callback(&on_release);
}

MemoryTracking::~MemoryTracking() {
  Kokkos::Tools::Experimental::set_allocate_data_callback(nullptr);
  Kokkos::Tools::Experimental::set_deallocate_data_callback(nullptr);
}

}  // namespace trellis
