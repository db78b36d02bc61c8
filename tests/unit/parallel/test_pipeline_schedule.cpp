// Pipeline arithmetic: stage balancing, explicit stage sizes, in-flight counts and bubble.
#include "trellis/core/error.hpp"
#include "trellis/parallel/pipeline_schedule.hpp"

#include "catch.hpp"

using namespace trellis;

TEST_CASE("stages are balanced by cost", "[pipeline]") {
  CHECK(balance_stages({1, 1, 1, 1}, 2) == std::vector<int>{0, 2, 4});
  CHECK(balance_stages({1, 1, 1, 1}, 4) == std::vector<int>{0, 1, 2, 3, 4});
  CHECK(balance_stages({5, 1, 1, 1, 1, 1}, 2) == std::vector<int>{0, 1, 6});
  CHECK(balance_stages({1, 2, 3, 4}, 1) == std::vector<int>{0, 4});
  // The most expensive stage is as cheap as possible: 3+4 | 5 | 6 beats other splits.
  const auto b = balance_stages({3, 4, 5, 6}, 3);
  CHECK(b == std::vector<int>{0, 2, 3, 4});
  CHECK_THROWS_AS(balance_stages({1, 1}, 3), ConfigError);
}

TEST_CASE("explicit stage sizes are checked", "[pipeline]") {
  const std::vector<double> costs(6, 1.0);
  CHECK(stage_boundaries("2,3,1", costs, 3) == std::vector<int>{0, 2, 5, 6});
  CHECK(stage_boundaries("", costs, 3) == std::vector<int>{0, 2, 4, 6});
  CHECK_THROWS_AS(stage_boundaries("2,3", costs, 3), ConfigError);
  CHECK_THROWS_AS(stage_boundaries("2,3,2", costs, 3), ConfigError);
  CHECK_THROWS_AS(stage_boundaries("2,x,1", costs, 3), ConfigError);
  CHECK_THROWS_AS(stage_boundaries("3,0,3", costs, 3), ConfigError);
}

TEST_CASE("schedules keep a bounded number of micro-batches in flight", "[pipeline]") {
  // GPipe: everything in flight; 1F1B: p - s on stage s, never more than M.
  CHECK(in_flight(PipelineSchedule::gpipe, 4, 0, 8) == 8);
  CHECK(in_flight(PipelineSchedule::one_f_one_b, 4, 0, 8) == 4);
  CHECK(in_flight(PipelineSchedule::one_f_one_b, 4, 3, 8) == 1);
  CHECK(in_flight(PipelineSchedule::one_f_one_b, 4, 0, 2) == 2);
  CHECK(in_flight(PipelineSchedule::one_f_one_b, 1, 0, 5) == 1);
  CHECK(warmup_forwards(PipelineSchedule::one_f_one_b, 4, 1, 8) == 2);
  CHECK(bubble_fraction(4, 8) == Approx(3.0 / 11.0));
  CHECK(bubble_fraction(1, 8) == 0.0);
  CHECK(parse_pipeline_schedule("1f1b") == PipelineSchedule::one_f_one_b);
  CHECK_THROWS_AS(parse_pipeline_schedule("zb"), ConfigError);
}
