// What `trellis plan` prints: the ranked table, the layouts that do not fit with their reason,
// the chosen plan's breakdown (step time by part, memory by category, the spot checkpoint
// interval) and the sbatch line that runs it; or the same as JSON (--json, read by
// tools/plot_plan).
#pragma once

#include "trellis/train/plan/plan_search.hpp"

#include <string>

namespace trellis {

struct ReportOptions {
  std::string config_file;  // as the user named it, for the sbatch line
  std::string model_name;   // for the JSON: the config file's stem
  int rows = 12;            // plans in the table
};

std::string plan_text(const PlanRequest& request, const PlanResult& result,
                      const ReportOptions& options);
std::string plan_json(const PlanRequest& request, const PlanResult& result,
                      const ReportOptions& options);
// "sbatch --nodes=2 ... slurm/multinode.sbatch CONFIG --parallel.tp=4 ..." for `plan`.
std::string sbatch_line(const PlanRequest& request, const Plan& plan, bool spot,
                        const std::string& config_file);
// "dp8 tp2 pp1 mb4 z1 bf16 recompute=full sp" (the layout in one word group).
std::string layout_label(const PlanLayout& layout);

}  // namespace trellis
