#include "trellis/train/monitoring/memory_report.hpp"

#include "trellis/comm/mpi_check.hpp"
#include "trellis/core/format.hpp"

#include <algorithm>
#include <numeric>
#include <vector>

namespace trellis {

MemoryPeaks gather_memory_peaks(MPI_Comm comm) {
  const MemorySnapshot mine = process_memory_ledger().snapshot();
  MemoryPeaks peaks;
  static_assert(sizeof(std::int64_t) == sizeof(long long), "MPI_LONG_LONG for int64");
  TRELLIS_MPI(MPI_Allreduce(mine.peak.data(), peaks.peak.data(), kMemoryCategories, MPI_LONG_LONG,
                            MPI_MAX, comm));
  int rank = 0;
  TRELLIS_MPI(MPI_Comm_rank(comm, &rank));
  // The largest total and its rank (MAXLOC on a double holds any byte count below 2^53).
  struct {
    double bytes;
    int rank;
  } local{static_cast<double>(mine.peak_total), rank}, largest{};
  TRELLIS_MPI(MPI_Allreduce(&local, &largest, 1, MPI_DOUBLE_INT, MPI_MAXLOC, comm));
  peaks.peak_total = static_cast<std::int64_t>(largest.bytes);
  peaks.peak_rank = largest.rank;
  peaks.at_peak = mine.at_peak;
  TRELLIS_MPI(
      MPI_Bcast(peaks.at_peak.data(), kMemoryCategories, MPI_LONG_LONG, largest.rank, comm));
  return peaks;
}

JsonLine memory_json(const MemoryBytes& bytes) {
  JsonLine json;
  for (int c = 0; c < kMemoryCategories; ++c)
    json.add(memory_category_name(static_cast<MemoryCategory>(c)),
             bytes[static_cast<std::size_t>(c)]);
  return json;
}

std::string describe_memory_peak(const MemoryPeaks& peaks) {
  std::vector<int> order(kMemoryCategories);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return peaks.at_peak[static_cast<std::size_t>(a)] > peaks.at_peak[static_cast<std::size_t>(b)];
  });
  std::string parts;
  for (int c : order) {
    const std::int64_t bytes = peaks.at_peak[static_cast<std::size_t>(c)];
    if (bytes <= 0) continue;
    if (!parts.empty()) parts += ", ";
    parts += std::string(memory_category_name(static_cast<MemoryCategory>(c))) + " " +
             format_bytes(static_cast<double>(bytes));
  }
  return format_bytes(static_cast<double>(peaks.peak_total)) + " on rank " +
         std::to_string(peaks.peak_rank) + " (" + parts + ")";
}

}  // namespace trellis
