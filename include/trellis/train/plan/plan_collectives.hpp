// The collectives and transfers one rank of each pipeline stage issues in a step, by axis, as
// the code that issues them does (the planner times exactly these, step_time.hpp):
//  - tp: the layers' collectives (UnitWork::tp_collectives) every micro-batch;
//  - pp: one send and one receive of the boundary activations per micro-batch and neighbour;
//  - dp: ZeRO-0 the gradient buckets' all-reduce once per step (parallel.bucket_mb); ZeRO-1
//    their reduce-scatter and the parameters' all-gather after the update; ZeRO-2/3 each
//    block's reduce-scatter after its backward every micro-batch (parallel/unit_exchange.hpp)
//    and the ranges outside the blocks (embeddings, final norm, head) bucketed once per step,
//    ZeRO-2 all-gathering every parameter after the update, ZeRO-3 only those ranges, and the
//    blocks before their forward and their backward in two slots: the slots still hold the
//    last two blocks of forward when backward starts and the first two of backward when the
//    next micro-batch's forward starts, so those are not gathered again. The CPU ranks' node
//    shared-memory exchange issues nothing on the dp communicator;
//  - embedding: the tied table's all-reduce between the first and the last stage.
// Training counts the same (comm/collective_tally.hpp, summary.json "collectives_per_step");
// tools/bench/plan_validation.py holds the two together.
#pragma once

#include "trellis/train/monitoring/step_record.hpp"
#include "trellis/train/plan/step_time.hpp"

#include <vector>

namespace trellis {

struct StageTraffic {
  StepCollectives issued;     // per step, by axis
  CollectiveTally dp_hidden;  // of issued.dp: what runs while backward computes
};

// [pp]: stage s's traffic.
std::vector<StageTraffic> predicted_traffic(const ModelWork& work, const PlanLayout& layout,
                                            const StepInputs& inputs);

}  // namespace trellis
