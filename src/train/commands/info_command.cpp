// `trellis info` (command.hpp): the build summary, the process grid a configuration gives, and
// where every rank runs (host, node-local rank, device).
#include "trellis/comm/grid_layout.hpp"
#include "trellis/comm/mpi_check.hpp"
#include "trellis/train/commands/command.hpp"
#include "trellis/train/monitoring/build_info.hpp"

#include <cstdio>
#include <string>
#include <vector>

namespace trellis {

int run_info_command(const CommandContext& context, const CommandArgs& args) {
  const TrainConfig config = agreed_run_config(context, args);
  const MPI_Comm world = context.world;
  const NodeBinding& node = context.node;
  int rank = 0, size = 1;
  TRELLIS_MPI(MPI_Comm_rank(world, &rank));
  TRELLIS_MPI(MPI_Comm_size(world, &size));
  const GridLayout layout = GridLayout::from_world(size, config.parallel.tp, config.parallel.pp);
  const GridCoords c = layout.coords(rank);

  // Fixed-width records so one MPI_Gather collects every rank's line.
  constexpr int kLine = 256;
  char line[kLine] = {};
  std::snprintf(line, kLine,
                "  rank %4d  host %-20s local rank %d/%d  device %s  grid dp=%d tp=%d pp=%d", rank,
                node.hostname.c_str(), node.local_rank, node.local_size,
                node.device >= 0 ? std::to_string(node.device).c_str() : "host", c.dp, c.tp, c.pp);
  std::vector<char> lines(rank == 0 ? static_cast<std::size_t>(kLine) * size : 0);
  TRELLIS_MPI(MPI_Gather(line, kLine, MPI_CHAR, lines.data(), kLine, MPI_CHAR, 0, world));

  std::string text = build_summary();
  text += "  ranks: " + std::to_string(size) + " on " + std::to_string(node.node_count) +
          " node(s); grid " + layout.describe() + "\n";
  for (int r = 0; r < size && rank == 0; ++r)
    text += std::string(&lines[static_cast<std::size_t>(r) * kLine]) + "\n";
  if (!text.empty() && text.back() == '\n') text.pop_back();
  context.log.info(text);
  return 0;
}

}  // namespace trellis
