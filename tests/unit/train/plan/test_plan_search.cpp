// The planner's search on a small GPT and a made-up machine: memory is the memory plan's, what
// does not fit says why, the deadline and the budget pick the plan, and the sbatch line runs it.
#include "catch.hpp"

#include "trellis/train/config/raw_config.hpp"
#include "trellis/train/plan/plan_report.hpp"
#include "trellis/train/plan/plan_search.hpp"

#include <nlohmann/json.hpp>

using namespace trellis;

namespace {

PlanRequest small_gpt_request() {
  PlanRequest r;
  r.config = TrainConfig::from(RawConfig::parse_text(
      "[model]\ntype = gpt\nn_layer = 4\nn_head = 4\nd_model = 64\nseq_len = 32\nvocab = 96\n"
      "[train]\nglobal_batch = 16\nmax_steps = 100\n[optim]\ntype = adamw\n",
      "test", {}));
  r.data.classes = 96;
  r.data.seq_len = 32;
  r.target_samples = 16 * 1000;
  return r;
}

MachineType box(double memory_gib) {
  MachineType m;
  m.name = "box";
  m.devices_per_node = 4;
  m.device_memory_gib = memory_gib;
  m.peak_tflops_fp32 = m.peak_tflops_bf16 = m.peak_tflops_fp16 = 0.1;
  m.gemm_efficiency_fp32 = m.gemm_efficiency_bf16 = {{64, 0.5}, {1024, 0.9}};
  m.attention_efficiency_fp32 = m.attention_efficiency_bf16 = {{1, 0.5}};
  m.memory_bandwidth_gbs = 20;
  m.intra_node = {5, 1};
  m.inter_node = {1, 30};
  m.checkpoint_bandwidth_gbs = 1;
  m.price_per_device_hour = 1;
  m.spot_price_per_device_hour = 0.3;
  m.spot_mtbi_hours = 10;
  m.restart_minutes = 5;
  m.max_nodes = 2;
  m.cpu_ranks = true;
  return m;
}

}  // namespace

TEST_CASE("plans: memory from the memory plan, ranked by cost", "[plan]") {
  const PlanRequest request = small_gpt_request();
  const std::vector<MachineType> machines = {box(16)};
  const PlanResult result = search_plans(request, machines);
  REQUIRE(result.cheapest == 0);
  REQUIRE(result.chosen >= 0);
  int fitting = 0;
  for (const Plan& p : result.plans) {
    if (!p.fits) continue;
    ++fitting;
    // Each plan's memory is the memory plan of its configuration.
    TrainConfig c = plan_config(request.config, p);
    c.resolve_batch(p.layout.dp);
    PlannedGrid grid{p.layout.dp, p.layout.tp, p.layout.pp, false};
    grid.shared_exchange = p.layout.nodes == 1 && p.layout.dp > 1 && p.layout.zero < 2;
    CHECK(plan_memory(c, request.data, grid).total() == p.memory.total());
    CHECK(p.step.total_s > 0);
    CHECK(p.hours == Approx(p.steps * p.step.total_s / 3600).epsilon(0.01));
    if (fitting > 40) break;
  }
  CHECK(fitting > 10);
  // Cheapest first, by the better of on demand and spot.
  const Plan& first = result.plans[0];
  for (std::size_t i = 1; i < result.plans.size() && result.plans[i].fits; ++i)
    CHECK(std::min(result.plans[i].cost_on_demand, result.plans[i].cost_spot) >=
          std::min(first.cost_on_demand, first.cost_spot) - 1e-9);
  // The fastest is at least as fast as every fitting plan.
  for (const Plan& p : result.plans)
    if (p.fits) CHECK(result.plans[result.fastest].hours <= p.hours);
}

TEST_CASE("plans that do not fit say what they need", "[plan]") {
  const PlanRequest request = small_gpt_request();
  const std::vector<MachineType> machines = {box(0.002)};  // 2 MiB per rank
  const PlanResult result = search_plans(request, machines);
  CHECK(result.cheapest < 0);
  CHECK(result.chosen < 0);
  REQUIRE(!result.plans.empty());
  CHECK_THAT(result.plans[0].reason, Catch::Contains("needs"));
  CHECK_THAT(result.plans[0].reason, Catch::Contains("per rank of"));
  const std::string text = plan_text(request, result, ReportOptions{"gpt.ini", "gpt", 5});
  CHECK_THAT(text, Catch::Contains("do not fit"));
  CHECK_THAT(text, Catch::Contains("no plan chosen"));
}

TEST_CASE("a deadline picks a faster plan, a budget a cheaper one", "[plan]") {
  PlanRequest request = small_gpt_request();
  std::vector<MachineType> machines = {box(16)};
  machines[0].spot_price_per_device_hour = 0;  // on demand only: hours and cost as listed
  const PlanResult free = search_plans(request, machines);
  const Plan& cheapest = free.plans[free.cheapest];
  const Plan& fastest = free.plans[free.fastest];
  REQUIRE(fastest.hours < cheapest.hours);
  request.deadline_hours = (fastest.hours + cheapest.hours) / 2;
  const PlanResult rushed = search_plans(request, machines);
  REQUIRE(rushed.chosen >= 0);
  CHECK(rushed.plans[rushed.chosen].hours <= request.deadline_hours);
  CHECK(rushed.plans[rushed.chosen].cost_on_demand >= cheapest.cost_on_demand);
  request.deadline_hours = fastest.hours / 2;  // impossible
  const PlanResult late = search_plans(request, machines);
  CHECK(late.chosen < 0);
  CHECK(late.chosen_why == "no plan meets the deadline and the budget");
  request.deadline_hours = 0;
  request.budget_usd = cheapest.cost_on_demand / 2;
  CHECK(search_plans(request, machines).chosen < 0);
}

TEST_CASE("the chosen plan's sbatch line and the JSON", "[plan]") {
  const PlanRequest request = small_gpt_request();
  const std::vector<MachineType> machines = {box(16)};
  const PlanResult result = search_plans(request, machines);
  REQUIRE(result.chosen >= 0);
  const Plan& p = result.plans[result.chosen];
  const std::string line = sbatch_line(request, p, true, "inputs/gpt.ini");
  CHECK_THAT(line, Catch::StartsWith("sbatch --nodes=" + std::to_string(p.layout.nodes) +
                                     " --ntasks-per-node=4 --cpus-per-task=1"));
  CHECK_THAT(line, Catch::Contains("slurm/preemptible.sbatch inputs/gpt.ini"));
  CHECK_THAT(line, Catch::Contains("--ckpt.interval_minutes="));
  for (const std::string& o : plan_overrides(request.config, p))
    CHECK_THAT(line, Catch::Contains(o));
  const auto json =
      nlohmann::json::parse(plan_json(request, result, ReportOptions{"g.ini", "g", 5}));
  CHECK(json["plans"].size() == result.plans.size());
  CHECK(json["best"]["chosen"] == result.chosen);
  CHECK(json["plans"][result.chosen]["fits"] == true);
  CHECK(json["plans"][result.chosen]["memory_bytes"] == p.memory.total());
  int pareto = 0;
  for (const auto& plan : json["plans"]) pareto += plan["pareto"].get<bool>();
  CHECK(pareto >= 1);
}
