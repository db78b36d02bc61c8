// The planner's arithmetic: alpha-beta collectives, the simulated pipeline against the bubble
// formula, Young/Daly and the expected time on spot, price windows, and the model's work
// against the FLOPs the registry counts.
#include "catch.hpp"

#include "trellis/train/model/model_registry.hpp"
#include "trellis/train/plan/run_cost.hpp"
#include "trellis/train/plan/step_time.hpp"

#include <cmath>

using namespace trellis;

TEST_CASE("alpha-beta collective times", "[plan]") {
  const LinkSpec link{10, 5};  // 10 GB/s, 5 us
  CHECK(all_reduce_seconds(1e9, 1, link) == 0);
  // Ring over 4: 2 x 3 latencies + 2 x 3/4 of the bytes.
  CHECK(all_reduce_seconds(1e9, 4, link) == Approx(6 * 5e-6 + 1.5 * 0.1));
  CHECK(all_gather_seconds(1e9, 4, link) == Approx(3 * 5e-6 + 0.75 * 0.1));
  CHECK(send_seconds(1e9, link) == Approx(5e-6 + 0.1));
}

TEST_CASE("the simulated pipeline has the bubble of (p - 1) / (M + p - 1)", "[plan]") {
  for (PipelineSchedule schedule : {PipelineSchedule::one_f_one_b, PipelineSchedule::gpipe}) {
    for (int p : {1, 2, 4}) {
      for (int m : {1, 4, 8}) {
        INFO("p " << p << " M " << m);
        const std::vector<double> f(p, 1.0), b(p, 2.0);
        const double makespan = pipeline_makespan(schedule, f, b, m, 0.0);
        CHECK(makespan == Approx((m + p - 1) * 3.0));
        CHECK(1 - m * 3.0 / makespan == Approx(bubble_fraction(p, m)));
      }
    }
  }
  // A slow stage sets the pace: M x its time plus the others' fill and drain.
  const double uneven = pipeline_makespan(PipelineSchedule::one_f_one_b, {1, 2}, {2, 4}, 8, 0.0);
  CHECK(uneven == Approx(8 * 6.0 + 3.0));
  // Transfers add to the critical path.
  CHECK(pipeline_makespan(PipelineSchedule::one_f_one_b, {1, 1}, {2, 2}, 1, 0.5) ==
        Approx(6.0 + 1.0));
}

TEST_CASE("Young/Daly interval and the expected time on spot", "[plan]") {
  CHECK(young_daly_interval_hours(0.1, 20) == Approx(2.0));  // sqrt(2 x 0.1 x 20)
  CHECK(young_daly_interval_hours(50, 2) == Approx(2.0));    // at most the MTBI
  CHECK(young_daly_interval_hours(0.1, 0) == 0);
  const SpotRun run = spot_run(100, 0.1, 0.2, 20);
  // 50 segments of 2.1 h, each interrupted with probability 2.1 / 20, losing 0.2 + 1.05 h.
  CHECK(run.interval_hours == Approx(2.0));
  CHECK(run.expected_hours == Approx(100 / 2.0 * 2.1 * (1 + (0.2 + 1.05) / 20)));
  CHECK(run.lost_hours == Approx(run.expected_hours - 105));
  // The interval minimises the expected time (first order): a nearby one does no better.
  const double at = run.expected_hours;
  const auto with_interval = [](double tau) {
    const double seg = tau + 0.1;
    return 100 / tau * seg * (1 + (0.2 + seg / 2) / 20);
  };
  CHECK(with_interval(1.5) > at * 0.999);
  CHECK(with_interval(2.6) > at * 0.999);
}

TEST_CASE("windowed cost and the cheapest start", "[plan]") {
  MachineType m;
  m.price_windows = {{22, 6, 0.5}};
  CHECK(windowed_cost(m, 2, 8, 4, 22) == Approx(2 * 8 * 4 * 0.5));
  CHECK(windowed_cost(m, 2, 8, 4, 10) == Approx(2 * 8 * 4));
  CHECK(windowed_cost(m, 2, 8, 48, 5) == Approx(2 * 8 * 2 * (16 + 8 * 0.5)));
  const BestStart best = cheapest_start(m, 2, 8, 8);
  CHECK(best.hour == 22);
  CHECK(best.cost == Approx(2 * 8 * 8 * 0.5));
  MachineType flat;
  CHECK(cheapest_start(flat, 2, 8, 8).hour == 0);
}

TEST_CASE("the decoder's work adds up to the FLOPs the registry counts", "[plan]") {
  ModelConfig model;
  model.type = ModelType::llama;
  model.n_layer = 3, model.n_head = 4, model.n_kv_head = 2, model.d_model = 128;
  model.seq_len = 64, model.vocab = 512;
  DataShape data;
  data.classes = 512, data.seq_len = 64;
  for (ModelType type : {ModelType::gpt, ModelType::llama}) {
    model.type = type;
    const ModelRegistration& r = model_registration(type);
    const double counted = static_cast<double>(r.sizes(model, data, 512).flops_per_sample);
    const ModelWork one = r.work(model, data, 512, 1, false);
    // The registry counts 6 FLOPs per parameter per token, the few non-matmul ones (biases,
    // norms) included: within 2%.
    CHECK(work_flops(one) == Approx(counted).epsilon(0.02));
    CHECK(one.units.size() == static_cast<std::size_t>(model.n_layer + 2));
    // Split over 2 tp ranks, each does half of every GEMM and of the attention.
    const ModelWork two = r.work(model, data, 512, 2, false);
    CHECK(2 * work_flops(two) == Approx(work_flops(one)).epsilon(1e-9));
    // Without sequence parallelism a block all-reduces 4 times per micro-batch, 2 of them in
    // forward; with it, it gathers 6 times and reduce-scatters 4 times instead, and sums its
    // norms' gradients (tools/bench/plan_validation.py holds these to what training issues).
    REQUIRE(two.units[1].tp_collectives.size() == 1);
    CHECK(two.units[1].tp_collectives[0].calls == 4);
    CHECK(two.units[1].tp_collectives[0].forward_calls == 2);
    const ModelWork sp = r.work(model, data, 512, 2, true);
    REQUIRE(sp.units[1].tp_collectives.size() == 3);
    CHECK(sp.units[1].tp_collectives[0].kind == TpCollective::all_gather);
    CHECK(sp.units[1].tp_collectives[0].calls == 6);
    CHECK(sp.units[1].tp_collectives[1].kind == TpCollective::reduce_scatter);
    CHECK(sp.units[1].tp_collectives[2].fixed_floats == model.d_model);
    CHECK(sp.units[1].elementwise_floats < two.units[1].elementwise_floats);
  }
}

TEST_CASE("the MLP's work adds up to its FLOPs less the first layer's input gradient", "[plan]") {
  ModelConfig model;
  model.type = ModelType::mlp;
  model.hidden = {256, 128};
  DataShape data;
  data.feature_numel = 784, data.classes = 10, data.sample_shape = {784};
  const ModelRegistration& r = model_registration(ModelType::mlp);
  const ModelWork work = r.work(model, data, 0, 1, false);
  const double registry = 6.0 * (784 * 256 + 256 * 128 + 128 * 10);
  CHECK(work_flops(work) == Approx(registry - 2.0 * 784 * 256));
  CHECK(work.params == Approx(784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10));
}

TEST_CASE("a step: compute, data-parallel exchange and the optimizer add up", "[plan]") {
  ModelWork work;
  UnitWork u;
  u.gemms.push_back({1, 1000, 1000});
  u.params = 1e6;
  work.units.push_back(u);
  MachineType m;
  m.peak_tflops_fp32 = 1;               // 1 TFLOP/s
  m.gemm_efficiency_fp32 = {{1, 0.5}};  // flat: every GEMM at half the peak
  m.memory_bandwidth_gbs = 100;
  m.intra_node = {10, 0};
  PlanLayout layout;
  layout.dp = 2, layout.micro_batch = 100;
  StepInputs in;
  in.global_batch = 400;
  in.stage_bounds = {0, 1};
  in.optimizer_state_buffers = 2;
  const StepPrediction s = predict_step(work, layout, in, m);
  CHECK(s.micro_batches == 2);
  // 2 micro-batches x 6 x 100 x 1000 x 1000 FLOPs at 0.5 TFLOP/s.
  CHECK(s.compute_s == Approx(2 * 6e8 / 0.5e12));
  CHECK(s.dp_comm_s == Approx(4e6 / 10e9));  // ring all-reduce over 2: the buffer once
  CHECK(s.optimizer_s == Approx(1e6 * (4.0 * 7 + 8) / 100e9));
  CHECK(s.total_s == Approx(s.compute_s + s.dp_comm_s + s.optimizer_s));
  layout.micro_batch = 300;
  CHECK_THROWS_AS(predict_step(work, layout, in, m), ConfigError);
}

TEST_CASE("CPU ranks sharing the node's CPUs fill the pipeline bubble", "[plan]") {
  // Two equal stages, 2 micro-batches: the simulated 1F1B schedule leaves each stage idle a
  // third of the time.
  ModelWork work;
  UnitWork u;
  u.gemms.push_back({1, 1000, 1000});
  u.output_floats = 1;
  work.units = {u, u};
  MachineType m;
  m.peak_tflops_fp32 = 1;
  m.gemm_efficiency_fp32 = {{1, 0.5}};
  m.memory_bandwidth_gbs = 100;
  m.intra_node = {1e6, 0};
  m.devices_per_node = 2;
  m.cpu_ranks = true;
  PlanLayout layout;
  layout.pp = 2, layout.micro_batch = 100;
  StepInputs in;
  in.global_batch = 200;
  in.stage_bounds = {0, 1, 2};
  const StepPrediction own = predict_step(work, layout, in, m);
  const double busy = 2 * 6e8 / 0.5e12;  // one stage: 2 micro-batches
  CHECK(own.compute_s == Approx(busy));
  CHECK(own.pipeline_s == Approx(busy / 2).epsilon(1e-3));  // (p - 1) / (M + p - 1) of 3
  // One CPU for both ranks: the rates are each rank's share, and one stage's idle time is the
  // other's turn, so the step is the mean busy time.
  m.cpus_per_node = 1;
  const StepPrediction shared = predict_step(work, layout, in, m);
  CHECK(shared.compute_s == Approx(busy));
  CHECK(shared.pipeline_s == Approx(0).margin(1e-9));
}
