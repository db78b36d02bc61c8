#include "trellis/parallel/pipeline_schedule.hpp"

#include "trellis/core/error.hpp"

#include <algorithm>
#include <limits>
#include <sstream>

namespace trellis {

PipelineSchedule parse_pipeline_schedule(const std::string& name) {
  if (name == "gpipe") return PipelineSchedule::gpipe;
  if (name == "1f1b") return PipelineSchedule::one_f_one_b;
  throw ConfigError("config key parallel.schedule = \"" + name + "\" is not one of gpipe, 1f1b");
}

const char* pipeline_schedule_name(PipelineSchedule schedule) {
  return schedule == PipelineSchedule::gpipe ? "gpipe" : "1f1b";
}

int warmup_forwards(PipelineSchedule schedule, int stages, int stage, int micro_batches) {
  if (schedule == PipelineSchedule::gpipe) return micro_batches;
  return std::min(stages - stage - 1, micro_batches);
}

int in_flight(PipelineSchedule schedule, int stages, int stage, int micro_batches) {
  const int warmup = warmup_forwards(schedule, stages, stage, micro_batches);
  return std::max(1, std::min(micro_batches, warmup + 1));
}

double bubble_fraction(int stages, int micro_batches) {
  return static_cast<double>(stages - 1) / static_cast<double>(micro_batches + stages - 1);
}

std::vector<int> balance_stages(const std::vector<double>& costs, int stages) {
  const int units = static_cast<int>(costs.size());
  if (stages < 1 || units < stages)
    throw ConfigError("config key parallel.pp = " + std::to_string(stages) + ": the model has " +
                      std::to_string(units) + " units to split (each stage needs at least one)");
  std::vector<double> prefix(static_cast<std::size_t>(units) + 1, 0.0);
  for (int i = 0; i < units; ++i) prefix[i + 1] = prefix[i] + costs[static_cast<std::size_t>(i)];
  const double inf = std::numeric_limits<double>::infinity();
  // best[s][i]: the least possible maximum stage cost of units [0, i) over s stages.
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(units + 1, inf));
  std::vector<std::vector<int>> cut(stages + 1, std::vector<int>(units + 1, 0));
  best[0][0] = 0.0;
  for (int s = 1; s <= stages; ++s)
    for (int i = s; i <= units; ++i)
      for (int j = s - 1; j < i; ++j) {
        const double cost = std::max(best[s - 1][j], prefix[i] - prefix[j]);
        if (cost < best[s][i]) {
          best[s][i] = cost;
          cut[s][i] = j;
        }
      }
  std::vector<int> bounds(static_cast<std::size_t>(stages) + 1, 0);
  bounds[stages] = units;
  for (int s = stages, i = units; s > 0; --s) {
    i = cut[s][i];
    bounds[s - 1] = i;
  }
  return bounds;
}

std::vector<int> stage_boundaries(const std::string& sizes, const std::vector<double>& costs,
                                  int stages) {
  if (sizes.empty()) return balance_stages(costs, stages);
  std::vector<int> bounds{0};
  std::stringstream in(sizes);
  std::string item;
  while (std::getline(in, item, ',')) {
    int count = 0;
    try {
      std::size_t used = 0;
      count = std::stoi(item, &used);
      if (used != item.size()) count = 0;
    } catch (const std::exception&) {
      count = 0;
    }
    if (count <= 0)
      throw ConfigError("config key parallel.stages = \"" + sizes +
                        "\": expected positive unit counts separated by commas");
    bounds.push_back(bounds.back() + count);
  }
  const int units = static_cast<int>(costs.size());
  if (static_cast<int>(bounds.size()) != stages + 1 || bounds.back() != units)
    throw ConfigError("config key parallel.stages = \"" + sizes + "\": expected " +
                      std::to_string(stages) + " counts (parallel.pp) summing to the model's " +
                      std::to_string(units) + " units");
  return bounds;
}

}  // namespace trellis
