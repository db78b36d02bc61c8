// The memory ledger (core/memory_ledger.hpp) in the run's reports: each interval of
// metrics.jsonl carries the writing rank's current and peak bytes; summary.json carries each
// category's peak, the largest over the ranks (pipeline stages hold different layers), and
// the rank with the largest total peak with its categories at that moment.
#pragma once

#include "trellis/core/memory_ledger.hpp"
#include "trellis/train/monitoring/json_line.hpp"

#include <mpi.h>

#include <array>
#include <cstdint>
#include <string>

namespace trellis {

using MemoryBytes = std::array<std::int64_t, kMemoryCategories>;

struct MemoryPeaks {
  MemoryBytes peak{};           // each category's peak, the largest over the ranks
  std::int64_t peak_total = 0;  // the largest total peak of any rank
  int peak_rank = 0;            // that rank
  MemoryBytes at_peak{};        // its categories when it peaked (they sum to peak_total)
};

// This process' ledger over `comm`'s ranks. Collective.
MemoryPeaks gather_memory_peaks(MPI_Comm comm);

// {"parameters": bytes, "gradients": bytes, ...}: every category, in the enum's order.
JsonLine memory_json(const MemoryBytes& bytes);

// "1.21 GiB on rank 3 (parameters 412 MiB, gradients 412 MiB, ...)": the categories that hold
// anything, largest first.
std::string describe_memory_peak(const MemoryPeaks& peaks);

}  // namespace trellis
