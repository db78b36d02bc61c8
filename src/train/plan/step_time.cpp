#include "trellis/train/plan/step_time.hpp"

#include "trellis/core/error.hpp"
#include "trellis/train/plan/plan_collectives.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace trellis {

double all_reduce_seconds(double bytes, int ranks, const LinkSpec& link) {
  if (ranks <= 1 || bytes <= 0) return 0;
  const double p = ranks;
  return 2 * (p - 1) * link.latency_us * 1e-6 +
         2 * (p - 1) / p * bytes / (link.bandwidth_gbs * 1e9);
}

double all_gather_seconds(double bytes, int ranks, const LinkSpec& link) {
  if (ranks <= 1 || bytes <= 0) return 0;
  const double p = ranks;
  return (p - 1) * link.latency_us * 1e-6 + (p - 1) / p * bytes / (link.bandwidth_gbs * 1e9);
}

double send_seconds(double bytes, const LinkSpec& link) {
  return bytes <= 0 ? 0 : link.latency_us * 1e-6 + bytes / (link.bandwidth_gbs * 1e9);
}

double tally_seconds(const CollectiveTally& tally, int ranks, const LinkSpec& link) {
  if (ranks <= 1) return 0;
  const double p = ranks, alpha = link.latency_us * 1e-6, beta = link.bandwidth_gbs * 1e9;
  double seconds = 0;
  for (std::size_t k = 0; k < kCollectiveKinds; ++k) {
    const CollectiveCount& c = tally.by_kind[k];
    switch (static_cast<CollectiveKind>(k)) {
      case CollectiveKind::all_reduce:
        seconds += c.calls * 2 * (p - 1) * alpha + 2 * (p - 1) / p * c.bytes / beta;
        break;
      case CollectiveKind::reduce_scatter:
      case CollectiveKind::all_gather:
      case CollectiveKind::broadcast:
        seconds += c.calls * (p - 1) * alpha + (p - 1) / p * c.bytes / beta;
        break;
      case CollectiveKind::send:
      case CollectiveKind::recv:
        seconds += c.calls * alpha + c.bytes / beta;
        break;
    }
  }
  return seconds;
}

double pipeline_makespan(PipelineSchedule schedule, const std::vector<double>& forward,
                         const std::vector<double>& backward, int micro_batches, double transfer) {
  const int p = static_cast<int>(forward.size()), m = micro_batches;
  // Each stage's order of passes, as the engine runs them: warm-up forwards, then one forward
  // and one backward alternately, then the remaining backwards (gpipe: all forwards first).
  struct Pass {
    bool forward;
    int micro;
  };
  std::vector<std::vector<Pass>> order(static_cast<std::size_t>(p));
  for (int s = 0; s < p; ++s) {
    const int warm = std::min(warmup_forwards(schedule, p, s, m), m);
    int f = 0, b = 0;
    for (; f < warm; ++f) order[s].push_back({true, f});
    while (b < m) {
      if (f < m) order[s].push_back({true, f++});
      order[s].push_back({false, b++});
    }
  }
  const double unset = -1;
  std::vector<std::vector<double>> f_end(p, std::vector<double>(m, unset)), b_end = f_end;
  std::vector<double> free_at(p, 0);
  std::vector<std::size_t> next(p, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < p; ++s) {
      while (next[s] < order[s].size()) {
        const Pass pass = order[s][next[s]];
        double ready = free_at[s];
        if (pass.forward) {
          if (s > 0) {
            if (f_end[s - 1][pass.micro] == unset) break;
            ready = std::max(ready, f_end[s - 1][pass.micro] + transfer);
          }
          f_end[s][pass.micro] = free_at[s] = ready + forward[s];
        } else {
          if (f_end[s][pass.micro] == unset) break;
          if (s + 1 < p) {
            if (b_end[s + 1][pass.micro] == unset) break;
            ready = std::max(ready, b_end[s + 1][pass.micro] + transfer);
          }
          b_end[s][pass.micro] = free_at[s] = ready + backward[s];
        }
        ++next[s];
        progress = true;
      }
    }
  }
  for (int s = 0; s < p; ++s)
    TRELLIS_REQUIRE(next[s] == order[s].size(), "pipeline_makespan: the schedule deadlocked");
  return *std::max_element(free_at.begin(), free_at.end());
}

namespace {

struct PassTimes {
  double forward = 0, backward = 0, tp_comm = 0;
};

// One unit's forward and backward for `samples` samples on one rank.
PassTimes unit_times(const UnitWork& u, double samples, const PlanLayout& layout,
                     const MachineType& machine) {
  const std::string& precision = layout.precision;
  const double peak = machine.peak_tflops(precision) * 1e12;
  const double word = precision == "fp32" ? 4 : 3;  // mixed: 16-bit copies beside fp32 state
  const double bandwidth = machine.memory_bandwidth_gbs * 1e9;
  PassTimes t;
  double recompute = 0;
  for (const GemmWork& g : u.gemms) {
    const double m = g.m * samples;
    const double eff = std::max(1e-3, machine.gemm_efficiency(precision, std::min({m, g.n, g.k})));
    const double one = 2 * m * g.n * g.k / (peak * eff);
    // Autocast rounds each GEMM's input and output gradient into its 16-bit operand buffers
    // (4 bytes read, 2 written per element) and the dx result back.
    const double rounding =
        precision == "fp32" ? 0 : 6 * m * (g.k + g.n + (g.input_grad ? g.k : 0)) / bandwidth;
    t.forward += one + rounding / 3;
    t.backward += (g.input_grad ? 2 : 1) * one + rounding * 2 / 3;
    recompute += one + rounding / 3;
  }
  const double attention =
      u.attention_flops * samples /
      (peak * std::max(1e-3, machine.attention_efficiency(precision, u.attention_head_dim)));
  t.forward += attention / 3;  // QK^T and AV forward: 4 of the 12 T d FLOPs per row
  t.backward += attention * 2 / 3;
  double conv = 0;
  for (const ConvWork& c : u.convs)
    conv +=
        c.flops * samples / (peak * std::max(1e-3, machine.conv_efficiency(precision, c.channels)));
  t.forward += conv / 3;
  t.backward += conv * 2 / 3;
  const double passes = u.elementwise_floats * samples * word / bandwidth;
  const double forward_passes = u.recompute_floats * samples * word / bandwidth;
  t.forward += forward_passes;
  t.backward += passes - forward_passes;
  recompute += attention / 3 + forward_passes;
  const LinkSpec& link = machine.intra_node;  // tp groups lie inside a node
  double forward_comm = 0, backward_comm = 0;
  for (const TpCollectiveWork& c : u.tp_collectives) {
    const double bytes = (c.floats * samples + c.fixed_floats) * 4;
    const double one = c.kind == TpCollective::all_reduce
                           ? all_reduce_seconds(bytes, layout.tp, link)
                           : all_gather_seconds(bytes, layout.tp, link);
    forward_comm += c.forward_calls * one;
    backward_comm += (c.calls - c.forward_calls) * one;
  }
  const double launches = u.kernels * machine.kernel_launch_us * 1e-6;
  t.forward += launches / 3 + forward_comm;
  t.backward += launches * 2 / 3 + backward_comm;
  t.tp_comm = forward_comm + backward_comm;
  if (u.block && layout.recompute == "full") {
    t.backward += recompute + forward_comm;  // the forward's collectives are issued again
    t.tp_comm += forward_comm;
  }
  if (u.block && layout.recompute == "selective") t.backward += attention / 3;
  return t;
}

}  // namespace

StepPrediction predict_step(const ModelWork& work, const PlanLayout& layout,
                            const StepInputs& inputs, const MachineType& machine) {
  const std::int64_t per_step = static_cast<std::int64_t>(layout.dp) * layout.micro_batch;
  if (layout.micro_batch <= 0 || inputs.global_batch % per_step != 0)
    throw ConfigError("train.global_batch = " + std::to_string(inputs.global_batch) +
                      " is not a multiple of dp x micro_batch = " + std::to_string(per_step));
  StepPrediction out;
  const int m = static_cast<int>(inputs.global_batch / per_step);
  out.micro_batches = m;
  const int p = layout.pp;
  TRELLIS_REQUIRE(static_cast<int>(inputs.stage_bounds.size()) == p + 1,
                  "predict_step: stage bounds for " + std::to_string(p) + " stages");
  const double samples = static_cast<double>(layout.micro_batch);
  std::vector<double> forward(p), backward(p), stage_params(p), tp_comm(p);
  double boundary_floats = 0;
  for (int s = 0; s < p; ++s) {
    for (int u = inputs.stage_bounds[s]; u < inputs.stage_bounds[s + 1]; ++u) {
      const UnitWork& unit = work.units.at(static_cast<std::size_t>(u));
      const PassTimes t = unit_times(unit, samples, layout, machine);
      forward[s] += t.forward;
      backward[s] += t.backward;
      tp_comm[s] += t.tp_comm;
      stage_params[s] += unit.params;
      if (s + 1 < p && u + 1 == inputs.stage_bounds[s + 1])
        boundary_floats = std::max(boundary_floats, unit.output_floats);
    }
  }
  const int per_node = machine.devices_per_node;
  const bool multi_node = layout.nodes > 1;
  // Rank order tp, dp, pp (comm/grid_layout.hpp): a dp group spans tp x dp consecutive ranks,
  // consecutive stages lie tp x dp ranks apart.
  const LinkSpec& dp_link =
      multi_node && layout.tp * layout.dp > per_node ? machine.inter_node : machine.intra_node;
  const LinkSpec& pp_link =
      multi_node && layout.tp * layout.dp >= per_node ? machine.inter_node : machine.intra_node;
  const double transfer = send_seconds(boundary_floats * samples * 4, pp_link);

  int slowest = 0;
  for (int s = 1; s < p; ++s)
    if (forward[s] + backward[s] > forward[slowest] + backward[slowest]) slowest = s;
  out.compute_s = m * (forward[slowest] + backward[slowest]);
  out.tp_comm_s = m * tp_comm[slowest];
  const double makespan =
      p > 1 ? pipeline_makespan(layout.schedule, forward, backward, m, transfer) : out.compute_s;
  out.pipeline_s = std::max(0.0, makespan - out.compute_s);
  const int ranks_on_node = std::min(machine.devices_per_node, layout.devices());
  if (machine.cpu_ranks && machine.cpus_per_node > 0 && ranks_on_node > machine.cpus_per_node &&
      p > 1) {
    // CPU ranks that outnumber the node's CPUs take turns on them: a stage waiting in the
    // bubble lends its CPU to the others. The rates were measured with every rank running, so
    // the node needs the ranks' mean busy time to do all the work, and the schedule's
    // critical path runs faster by the ranks' share of a CPU while the others wait.
    const double share = static_cast<double>(machine.cpus_per_node) / ranks_on_node;
    double busy = 0;
    for (int s = 0; s < p; ++s) busy += m * (forward[s] + backward[s]) / p;
    out.compute_s = busy;
    out.pipeline_s = std::max(0.0, makespan * share - busy);
  }

  // The data-parallel exchange of the stage with the most parameters: the collectives it
  // issues (plan_collectives.hpp), the part that runs during backward hidden as far as the
  // machine overlaps them.
  const std::vector<StageTraffic> traffic = predicted_traffic(work, layout, inputs);
  out.collectives = traffic.front().issued;
  int widest = 0;
  for (int s = 1; s < p; ++s)
    if (stage_params[s] > stage_params[widest]) widest = s;
  const double params = stage_params[widest];
  const int dp = layout.dp;
  const StageTraffic& exchange = traffic[static_cast<std::size_t>(widest)];
  double exposed = 0;
  if (dp > 1 && inputs.cpu_shared_exchange) {
    // Each rank sums its slice of every peer's gradients and writes it back to every peer
    // (ZeRO-1: into its own buffer, and gathers the peers' updated slices after the update).
    exposed = 2 * params * 4 / (machine.memory_bandwidth_gbs * 1e9) +
              2 * machine.intra_node.latency_us * 1e-6;
  } else {
    exposed = (1 - machine.comm_overlap) * tally_seconds(exchange.dp_hidden, dp, dp_link) +
              tally_seconds(exchange.issued.dp - exchange.dp_hidden, dp, dp_link);
  }
  exposed += tally_seconds(traffic.front().issued.embedding, 2, pp_link);
  out.dp_comm_s = exposed;

  // The update reads and writes the parameters and their state, reads the gradients; the
  // gradients are zeroed and read once more for the norm. 16-bit runs refresh their copies.
  const double shard = layout.zero >= 1 ? params / dp : params;
  const double bytes_per_param =
      4.0 * (3 + 2 * inputs.optimizer_state_buffers) + 8 + (layout.precision == "fp32" ? 0 : 2);
  out.optimizer_s = shard * bytes_per_param / (machine.memory_bandwidth_gbs * 1e9);
  out.total_s = out.compute_s + out.pipeline_s + out.dp_comm_s + out.optimizer_s;
  return out;
}

}  // namespace trellis
