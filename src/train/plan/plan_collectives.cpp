#include "trellis/train/plan/plan_collectives.hpp"

#include <algorithm>
#include <cmath>

namespace trellis {

namespace {

CollectiveKind kind_of(TpCollective c) {
  switch (c) {
    case TpCollective::all_gather:
      return CollectiveKind::all_gather;
    case TpCollective::reduce_scatter:
      return CollectiveKind::reduce_scatter;
    case TpCollective::all_reduce:
      break;
  }
  return CollectiveKind::all_reduce;
}

void add(CollectiveTally& tally, CollectiveKind kind, double calls, double bytes) {
  if (calls <= 0) return;
  CollectiveCount& c = tally.by_kind[static_cast<std::size_t>(kind)];
  c.calls += static_cast<std::int64_t>(std::llround(calls));
  c.bytes += bytes;
}

// The parameters of one stage as ZeRO lays them out (parallel/zero_layout.hpp): the blocks
// (each one unit of the exchange) and the ranges between them.
struct StageParams {
  double all = 0, blocks = 0;
  std::vector<double> block_sizes;  // in order
  std::vector<double> outer_runs;   // consecutive non-block units, in order
};

StageParams stage_params(const ModelWork& work, int first, int last) {
  StageParams out;
  bool in_run = false;
  for (int u = first; u < last; ++u) {
    const UnitWork& unit = work.units[static_cast<std::size_t>(u)];
    out.all += unit.params;
    if (unit.params <= 0) continue;
    if (unit.block) {
      out.blocks += unit.params;
      out.block_sizes.push_back(unit.params);
      in_run = false;
    } else {
      if (!in_run) out.outer_runs.push_back(0);
      out.outer_runs.back() += unit.params;
      in_run = true;
    }
  }
  return out;
}

double buckets(double floats, double bucket_floats) {
  return floats <= 0 ? 0 : std::ceil(floats / bucket_floats);
}

// ZeRO-3's block gathers in one step (unit_exchange.hpp): forward of the first micro-batch
// gathers every block, each backward and each later forward all but two (the slots still hold
// them); one block: one slot, gathered once.
double zero3_gathered_floats(const std::vector<double>& blocks, int micro_batches, double* calls) {
  const std::size_t k = blocks.size();
  double floats = 0;
  *calls = 0;
  if (k == 0) return 0;
  const auto gather = [&](std::size_t u) {
    floats += blocks[u];
    *calls += 1;
  };
  for (std::size_t u = 0; u < k; ++u) gather(u);
  if (k < 3) return floats;
  for (int micro = 0; micro < micro_batches; ++micro) {
    for (std::size_t u = 0; u + 2 < k; ++u) gather(u);  // backward: k-3 .. 0
    if (micro + 1 < micro_batches)
      for (std::size_t u = 2; u < k; ++u) gather(u);  // the next forward: 2 .. k-1
  }
  return floats;
}

void data_parallel(const StageParams& p, const PlanLayout& l, const StepInputs& in, int m,
                   StageTraffic& out) {
  CollectiveTally& dp = out.issued.dp;
  const double w = in.grad_wire_bytes, bucket = in.bucket_bytes / 4;
  if (l.dp <= 1 || in.cpu_shared_exchange) return;
  if (l.zero == 0) {
    add(dp, CollectiveKind::all_reduce, buckets(p.all, bucket), p.all * w);
    add(out.dp_hidden, CollectiveKind::all_reduce, buckets(p.all, bucket), p.all * w);
    return;
  }
  if (l.zero == 1) {
    add(dp, CollectiveKind::reduce_scatter, buckets(p.all, bucket), p.all * w);
    add(out.dp_hidden, CollectiveKind::reduce_scatter, buckets(p.all, bucket), p.all * w);
    add(dp, CollectiveKind::all_gather, buckets(p.all, bucket), p.all * 4);
    return;
  }
  const double blocks = static_cast<double>(p.block_sizes.size());
  add(dp, CollectiveKind::reduce_scatter, m * blocks, m * p.blocks * w);
  add(out.dp_hidden, CollectiveKind::reduce_scatter, m * blocks, m * p.blocks * w);
  double outer_calls = 0;
  for (double run : p.outer_runs) outer_calls += buckets(run, bucket);
  const double outer = p.all - p.blocks;
  add(dp, CollectiveKind::reduce_scatter, outer_calls, outer * w);
  if (l.zero == 2) {
    add(dp, CollectiveKind::all_gather, outer_calls + blocks, p.all * 4);
    return;
  }
  add(dp, CollectiveKind::all_gather, outer_calls, outer * 4);
  double calls = 0;
  const double gathered = zero3_gathered_floats(p.block_sizes, m, &calls);
  add(dp, CollectiveKind::all_gather, calls, gathered * in.gather_wire_bytes);
  add(out.dp_hidden, CollectiveKind::all_gather, calls, gathered * in.gather_wire_bytes);
}

}  // namespace

std::vector<StageTraffic> predicted_traffic(const ModelWork& work, const PlanLayout& l,
                                            const StepInputs& in) {
  const int p = l.pp;
  const int m =
      static_cast<int>(in.global_batch / (static_cast<std::int64_t>(l.dp) * l.micro_batch));
  const double samples = static_cast<double>(l.micro_batch);
  std::vector<StageTraffic> out(static_cast<std::size_t>(p));
  for (int s = 0; s < p; ++s) {
    const int first = in.stage_bounds[s], last = in.stage_bounds[s + 1];
    StageTraffic& t = out[static_cast<std::size_t>(s)];
    for (int u = first; u < last && l.tp > 1; ++u) {
      const UnitWork& unit = work.units[static_cast<std::size_t>(u)];
      const bool rerun = unit.block && l.recompute == "full";
      for (const TpCollectiveWork& c : unit.tp_collectives) {
        const double calls = double(c.calls + (rerun ? c.forward_calls : 0)) * m;
        add(t.issued.tp, kind_of(c.kind), calls, (c.floats * samples + c.fixed_floats) * 4 * calls);
      }
    }
    // Activations forward and their gradients back, per micro-batch and neighbour.
    const auto boundary = [&](int stage) {
      return work.units[static_cast<std::size_t>(in.stage_bounds[stage + 1] - 1)].output_floats *
             samples * 4;
    };
    for (const bool next : {true, false}) {
      if (next ? s + 1 >= p : s == 0) continue;
      const double bytes = boundary(next ? s : s - 1);
      add(t.issued.pp, CollectiveKind::send, m, m * bytes);
      add(t.issued.pp, CollectiveKind::recv, m, m * bytes);
    }
    if (work.tied_table && p > 1 && (s == 0 || s == p - 1))
      add(t.issued.embedding, CollectiveKind::all_reduce, 1, work.tied_floats * 4);
    data_parallel(stage_params(work, first, last), l, in, m, t);
  }
  return out;
}

}  // namespace trellis
