// CollectiveTally: how many collectives and transfers a communicator issued, and how many
// bytes, by kind. Every Communicator make_communicator() returns is a CountingCommunicator
// that keeps one, so a step's traffic is counted by the code that issues it: the trainer
// reports it per axis (summary.json "collectives_per_step") and the planner's validation
// holds its predicted collectives to it (train/plan/).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace trellis {

enum class CollectiveKind { all_reduce, reduce_scatter, all_gather, broadcast, send, recv };
constexpr std::size_t kCollectiveKinds = 6;
const char* collective_kind_name(CollectiveKind kind);

struct CollectiveCount {
  std::int64_t calls = 0;
  // The whole tensor: an all-gather's gathered result, a reduce-scatter's input, an
  // all-reduce's buffer, a send's message (what the alpha-beta formulas take).
  double bytes = 0;
};

struct CollectiveTally {
  std::array<CollectiveCount, kCollectiveKinds> by_kind{};

  void add(CollectiveKind kind, double bytes) {
    CollectiveCount& c = by_kind[static_cast<std::size_t>(kind)];
    ++c.calls;
    c.bytes += bytes;
  }
  const CollectiveCount& operator[](CollectiveKind kind) const {
    return by_kind[static_cast<std::size_t>(kind)];
  }
  CollectiveTally& operator+=(const CollectiveTally& o);
  // The traffic between two snapshots (a step's: after - before).
  friend CollectiveTally operator-(const CollectiveTally& after, const CollectiveTally& before);
  bool empty() const;
};

}  // namespace trellis
