// The planner's collectives per step (train/plan/plan_collectives.hpp) on a hand-made model:
// ZeRO-3's two-slot gathers, ZeRO-1's reduce-scatter and gather, the pipeline's sends, the
// tied table, and a full recomputation's repeated forward collectives. (Against training's
// own counts: tools/bench/plan_validation.py, e2e.plan_validation.)
#include "catch.hpp"

#include "trellis/train/plan/plan_collectives.hpp"

using namespace trellis;

namespace {

// embed (outer, 100 params) | 4 blocks of 1000 | head (outer, 10), one tp all-reduce of 8
// floats per sample in each block's forward and one in its backward.
ModelWork toy_model() {
  ModelWork work;
  UnitWork embed;
  embed.params = 100;
  embed.output_floats = 8;
  work.units.push_back(embed);
  for (int i = 0; i < 4; ++i) {
    UnitWork block;
    block.block = true;
    block.params = 1000;
    block.output_floats = 8;
    block.tp_collectives.push_back({TpCollective::all_reduce, 8, 2, 1});
    work.units.push_back(block);
  }
  UnitWork head;
  head.params = 10;
  work.units.push_back(head);
  work.tied_table = true;
  work.tied_floats = 50;
  return work;
}

}  // namespace

TEST_CASE("the planner's collectives per step", "[plan]") {
  const ModelWork work = toy_model();
  PlanLayout l;
  StepInputs in;
  in.global_batch = 8;
  in.stage_bounds = {0, 6};
  in.bucket_bytes = 1 << 20;

  SECTION("ZeRO-3: blocks gathered before forward and backward, two slots kept") {
    l.dp = 2, l.zero = 3, l.micro_batch = 2;  // 2 micro-batches per rank
    const StepCollectives c = predicted_traffic(work, l, in).front().issued;
    // Forward of the first micro-batch: 4 blocks; backward: 2 (the last two are in the
    // slots); the next forward: 2; its backward: 2. The outer ranges once after the update.
    const CollectiveCount gathers = c.dp[CollectiveKind::all_gather];
    CHECK(gathers.calls == 4 + 2 + 2 + 2 + 2);
    CHECK(gathers.bytes == (10 * 1000 + 110) * 4.0);
    // Each block reduce-scattered every micro-batch; the two outer ranges once.
    CHECK(c.dp[CollectiveKind::reduce_scatter].calls == 2 * 4 + 2);
    CHECK(c.dp[CollectiveKind::reduce_scatter].bytes == (2 * 4000 + 110) * 4.0);
    CHECK(c.tp.empty());
    CHECK(c.pp.empty());
    CHECK(c.embedding.empty());  // one stage: the table is not shared across stages
  }
  SECTION("ZeRO-1 over the communicator: reduce-scatter, then the parameters gathered") {
    l.dp = 2, l.zero = 1, l.micro_batch = 4;
    const StepCollectives c = predicted_traffic(work, l, in).front().issued;
    CHECK(c.dp[CollectiveKind::reduce_scatter].calls == 1);
    CHECK(c.dp[CollectiveKind::reduce_scatter].bytes == 4110 * 4.0);
    CHECK(c.dp[CollectiveKind::all_gather].bytes == 4110 * 4.0);
    in.cpu_shared_exchange = true;  // the node's shared memory: nothing on the communicator
    CHECK(predicted_traffic(work, l, in).front().issued.dp.empty());
  }
  SECTION("pipeline: sends and receives per micro-batch, the tied table between the ends") {
    l.pp = 2, l.micro_batch = 2, l.tp = 2;
    in.stage_bounds = {0, 3, 6};
    const std::vector<StageTraffic> t = predicted_traffic(work, l, in);
    REQUIRE(t.size() == 2);
    for (const StageTraffic& stage : t) {
      CHECK(stage.issued.pp[CollectiveKind::send].calls == 4);
      CHECK(stage.issued.pp[CollectiveKind::recv].bytes == 4 * 8 * 2 * 4.0);
      CHECK(stage.issued.embedding[CollectiveKind::all_reduce].bytes == 50 * 4.0);
    }
    // 2 blocks on the first stage, 2 calls each per micro-batch of 2 samples x 8 floats.
    CHECK(t[0].issued.tp[CollectiveKind::all_reduce].calls == 2 * 2 * 4);
    CHECK(t[0].issued.tp[CollectiveKind::all_reduce].bytes == 16 * 16 * 4.0);
    l.recompute = "full";  // each block's forward all-reduce once more
    CHECK(predicted_traffic(work, l, in)[0].issued.tp[CollectiveKind::all_reduce].calls == 24);
  }
}
