// `trellis info` (command.hpp): the build summary, the process grid a configuration gives,
// where every rank runs (host, node-local rank, device), and, for a language model whose
// vocabulary the configuration gives, its size, FLOPs and memory plan per rank on that grid,
// category by category (config/memory_plan.hpp: no data read, no large buffer allocated: an 8B
// model's numbers print on a laptop).
#include "trellis/comm/grid_layout.hpp"
#include "trellis/comm/mpi_check.hpp"
#include "trellis/core/code_path.hpp"
#include "trellis/core/format.hpp"
#include "trellis/kernels/bf16_speed_probe.hpp"
#include "trellis/nn/conv2d.hpp"
#include "trellis/nn/parameter_store.hpp"
#include "trellis/train/commands/command.hpp"
#include "trellis/train/config/memory_plan.hpp"
#include "trellis/train/model/model_registry.hpp"
#include "trellis/train/monitoring/build_info.hpp"

#include <cstdio>
#include <string>
#include <vector>

namespace trellis {

namespace {

std::string printf_text(const char* format, long double a, long double b = 0, long double c = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, format, a, b, c);
  return buf;
}

// The model section's numbers when they need no data: a token model with model.vocab set.
std::string model_summary(TrainConfig config, const PlannedGrid& grid) {
  const int dp = grid.dp;
  const ModelRegistration& r = model_registration(config.model.type);
  if (r.data != DataKind::tokens || config.model.vocab <= 0) return "";
  DataShape data;
  data.classes = config.model.vocab;
  data.seq_len = config.model.seq_len;
  r.validate(config.model);
  config.resolve_batch(dp);
  const ModelSizes sizes = r.sizes(config.model, data, config.model.vocab);
  std::string text = std::string("  model: ") + r.name + ", " +
                     printf_text("%.4Lg B parameters", sizes.params / 1e9L);
  if (sizes.flops_per_sample > 0)
    text +=
        printf_text(", %.3Lg training FLOPs per sequence (%.3Lg per token, %.3Lg per step)",
                    sizes.flops_per_sample, sizes.flops_per_sample / data.seq_len,
                    sizes.flops_per_sample * static_cast<long double>(config.train.global_batch));
  const MemoryPlan plan = plan_memory(config, data, grid);
  text += "\n  memory plan per rank" +
          (grid.pp > 1 ? " (pipeline stage " + std::to_string(plan.stage) + ", the largest)"
                       : std::string()) +
          ", micro-batch of " + std::to_string(config.micro_batch()) + ": " +
          format_bytes(static_cast<double>(plan.total())) + "\n";
  for (int c = 0; c < kMemoryCategories; ++c)
    if (plan.bytes[c] > 0)
      text += "    " + format_text("%-16s", memory_category_name(static_cast<MemoryCategory>(c))) +
              format_bytes(static_cast<double>(plan.bytes[c])) + "\n";
  return text;
}

}  // namespace

int run_info_command(const CommandContext& context, const CommandArgs& args) {
  const TrainConfig config = agreed_run_config(context, args);
  const MPI_Comm world = context.world;
  const NodeBinding& node = context.node;
  int rank = 0, size = 1;
  TRELLIS_MPI(MPI_Comm_rank(world, &rank));
  TRELLIS_MPI(MPI_Comm_size(world, &size));
  // The memory plan is for the job asked about (--ranks), which need not be this one: this
  // job's grid is shown only when its ranks fit one.
  const int planned =
      args.integer("--ranks") > 0 ? static_cast<int>(args.integer("--ranks")) : size;
  const GridLayout planned_layout =
      GridLayout::from_world(planned, config.parallel.tp, config.parallel.pp);
  const bool own_grid = size % (config.parallel.tp * config.parallel.pp) == 0;
  const GridLayout layout =
      own_grid ? GridLayout::from_world(size, config.parallel.tp, config.parallel.pp)
               : planned_layout;
  const GridCoords c = own_grid ? layout.coords(rank) : GridCoords{};

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
  // A timing, so not part of the build summary (checkpoints store that, alike on all ranks).
  if (const double speedup = kernels::measured_bf16_gemm_speedup(); speedup > 0) {
    text += "  bf16 speed: oneDNN's bf16 GEMM measured " + format_text("%.2f", speedup) +
            "x its fp32 GEMM on rank 0; precision.kernels = auto takes " +
            (speedup >= kernels::kNativeBf16MinSpeedup ? "native" : "emulated") + " bf16\n";
  }
  {
    const nn::ParameterStore fp32_store;
    const int block =
        nn::conv_channel_block(nn::ConvLayout::automatic, nn::ConvImpl::automatic, fp32_store);
    text += "  cnn activations: " +
            (block > 1 ? "nChw" + std::to_string(block) + "c (oneDNN's fp32 convolution layout)"
                       : std::string("NCHW")) +
            " with kernels.conv_layout = auto\n";
  }
  text += "  ranks: " + std::to_string(size) + " on " + std::to_string(node.node_count) +
          " node(s); grid " + (own_grid ? layout.describe() : std::string("none")) + "\n";
  for (int r = 0; r < size && rank == 0; ++r)
    text += std::string(&lines[static_cast<std::size_t>(r) * kLine]) + "\n";
  PlannedGrid grid;
  grid.dp = planned / (config.parallel.tp * config.parallel.pp);
  grid.tp = config.parallel.tp;
  grid.pp = config.parallel.pp;
  // As training resolves parallel.grad_exchange on one node of a host build (training_model);
  // where a planned job's ranks will run is not known, so only an explicit shared_memory.
  const bool one_node =
      planned == size ? node.node_count == 1 : config.parallel.grad_exchange == "shared_memory";
  grid.shared_exchange =
      grid.dp > 1 && kHostKernels && one_node && config.parallel.grad_exchange != "communicator" &&
      config.parallel.grad_dtype == Precision::fp32 && config.parallel.powersgd_rank == 0;
  if (planned != size)
    text += "  planned for " + std::to_string(planned) + " ranks: grid " +
            planned_layout.describe() + "\n";
  text += model_summary(config, grid);
  if (!text.empty() && text.back() == '\n') text.pop_back();
  context.log.info(text);
  return 0;
}

}  // namespace trellis
