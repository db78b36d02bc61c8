#include "trellis/train/plan/plan_report.hpp"

#include "trellis/core/format.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace trellis {

namespace {

std::string hours_text(double hours) {
  if (hours < 1.0 / 60) return format_text("%.0f s", hours * 3600);
  if (hours < 1) return format_text("%.0f min", hours * 60);
  if (hours < 48) return format_text("%.1f h", hours);
  return format_text("%.1f d", hours / 24);
}

std::string money(double usd) {
  return usd >= 100 ? format_text("$%.0f", usd) : format_text("$%.2f", usd);
}

std::string row(const Plan& p, int index) {
  const PlanLayout& l = p.layout;
  std::string spot = "-";
  if (p.spot)
    spot = money(p.cost_spot) + " / " + hours_text(p.spot_run.expected_hours) + ", ckpt " +
           hours_text(p.spot_run.interval_hours);
  return format_text("%3d  %-20s %3d x %-3d %-26s %10s %9.3f s %9s %10s  %s\n", index,
                     p.machine->name.c_str(), l.nodes, p.machine->devices_per_node,
                     layout_label(l).c_str(),
                     format_bytes(static_cast<double>(p.memory.total())).c_str(), p.step.total_s,
                     hours_text(p.hours).c_str(), money(p.cost_on_demand).c_str(), spot.c_str());
}

}  // namespace

std::string layout_label(const PlanLayout& l) {
  std::string text =
      format_text("dp%d tp%d pp%d mb%lld z%d %s", l.dp, l.tp, l.pp,
                  static_cast<long long>(l.micro_batch), l.zero, l.precision.c_str());
  if (l.recompute != "none") text += " rc=" + l.recompute;
  if (l.sequence_parallel) text += " sp";
  if (l.pp > 1 && l.schedule == PipelineSchedule::gpipe) text += " gpipe";
  return text;
}

std::string sbatch_line(const PlanRequest& request, const Plan& plan, bool spot,
                        const std::string& config_file) {
  const PlanLayout& l = plan.layout;
  const MachineType& m = *plan.machine;
  std::string line = "sbatch --nodes=" + std::to_string(l.nodes) +
                     " --ntasks-per-node=" + std::to_string(m.devices_per_node);
  line +=
      m.cpu_ranks ? " --cpus-per-task=1" : " --gpus-per-node=" + std::to_string(m.devices_per_node);
  if (plan.begin_hour >= 0) line += format_text(" --begin=%02d:00", plan.begin_hour);
  const char* script = spot          ? "slurm/preemptible.sbatch"
                       : l.nodes > 1 ? "slurm/multinode.sbatch"
                                     : "slurm/train.sbatch";
  line += std::string(" ") + script + " " + config_file;
  for (const std::string& o : plan_overrides(request.config, plan)) line += " " + o;
  if (spot)
    line += format_text(" --ckpt.interval_minutes=%.0f --ckpt.resume=auto",
                        std::max(1.0, std::round(plan.spot_run.interval_hours * 60)));
  return line;
}

std::string plan_text(const PlanRequest& request, const PlanResult& result,
                      const ReportOptions& options) {
  std::string text;
  const double global = static_cast<double>(request.config.train.global_batch);
  int fitting = 0;
  for (const Plan& p : result.plans) fitting += p.fits;
  text += format_text("plans for %s: %.4g samples = %.0f steps of %.0f; %d layouts, %d fit\n",
                      options.config_file.c_str(), request.target_samples,
                      std::ceil(request.target_samples / global), global,
                      static_cast<int>(result.plans.size()), fitting);
  text += format_text("%3s  %-20s %-9s %-26s %10s %11s %9s %10s  %s\n", "#", "machine", "nodes",
                      "layout", "mem/rank", "step", "time", "on demand",
                      "spot (expected time, checkpoint every)");
  std::set<int> shown;
  for (int i = 0; i < fitting && i < options.rows; ++i) shown.insert(i);
  for (int extra : {result.fastest, result.chosen})
    if (extra >= 0) shown.insert(extra);
  for (int i : shown) text += row(result.plans[static_cast<std::size_t>(i)], i + 1);

  // The reasons layouts do not fit, one line per machine type and reason kind.
  std::map<std::string, std::pair<int, std::string>> misfits;
  for (const Plan& p : result.plans) {
    if (p.fits) continue;
    auto& entry = misfits[p.machine->name];
    if (entry.first++ == 0) entry.second = layout_label(p.layout) + ": " + p.reason;
  }
  for (const auto& [name, entry] : misfits)
    text += format_text("  %s: %d layouts do not fit, e.g. %s\n", name.c_str(), entry.first,
                        entry.second.c_str());
  if (result.chosen < 0) return text + "no plan chosen: " + result.chosen_why + "\n";

  const Plan& p = result.plans[static_cast<std::size_t>(result.chosen)];
  const StepPrediction& s = p.step;
  text +=
      format_text("\nchosen: #%d, %s: %s on %d x %s (%s)\n", result.chosen + 1,
                  result.chosen_why.c_str(), layout_label(p.layout).c_str(), p.layout.nodes,
                  p.machine->name.c_str(), p.machine->calibrated ? "calibrated" : "uncalibrated");
  text += format_text(
      "  step %.3f s = compute %.3f (of which tp collectives %.3f) + pipeline %.3f + dp exchange "
      "%.3f + optimizer %.3f; %d micro-batch%s\n",
      s.total_s, s.compute_s, s.tp_comm_s, s.pipeline_s, s.dp_comm_s, s.optimizer_s,
      s.micro_batches, s.micro_batches == 1 ? "" : "es");
  text += "  memory per rank " + format_bytes(static_cast<double>(p.memory.total())) + " of " +
          format_text("%g GiB", p.machine->device_memory_gib) + ": " +
          describe_memory_plan(p.memory) + "\n";
  text += format_text("  on demand: %s, %s", hours_text(p.hours).c_str(),
                      money(p.cost_on_demand).c_str());
  if (p.begin_hour >= 0)
    text += format_text(" (starting at %02d:00 UTC saves %s)", p.begin_hour,
                        money(p.begin_saving).c_str());
  text += "\n";
  if (p.spot)
    text += format_text(
        "  spot: %s expected (%s redone or restarting), %s; checkpoint (%s) every %s "
        "(Young/Daly: save %s, job MTBI %s)\n",
        hours_text(p.spot_run.expected_hours).c_str(), hours_text(p.spot_run.lost_hours).c_str(),
        money(p.cost_spot).c_str(), format_bytes(p.checkpoint_bytes).c_str(),
        hours_text(p.spot_run.interval_hours).c_str(), hours_text(p.spot_run.save_hours).c_str(),
        hours_text(p.machine->spot_mtbi_hours / p.layout.nodes).c_str());
  text += "  run it: " + sbatch_line(request, p, result.chosen_spot, options.config_file) + "\n";
  return text;
}

namespace {

// The same shape as summary.json's "collectives_per_step" (train/monitoring/jsonl_sink.cpp).
nlohmann::json collectives_json(const StepCollectives& c) {
  using nlohmann::json;
  const auto tally = [](const CollectiveTally& t) {
    json out = json::object();
    for (std::size_t k = 0; k < kCollectiveKinds; ++k)
      if (t.by_kind[k].calls > 0)
        out[collective_kind_name(static_cast<CollectiveKind>(k))] = {{"calls", t.by_kind[k].calls},
                                                                     {"bytes", t.by_kind[k].bytes}};
    return out;
  };
  return {{"tp", tally(c.tp)},
          {"dp", tally(c.dp)},
          {"pp", tally(c.pp)},
          {"embedding", tally(c.embedding)}};
}

}  // namespace

std::string plan_json(const PlanRequest& request, const PlanResult& result,
                      const ReportOptions& options) {
  using nlohmann::json;
  json out;
  out["model"] = options.model_name;
  out["target"] = {{"kind", "samples"}, {"value", request.target_samples}};
  out["deadline_hours"] = request.deadline_hours;
  out["budget_usd"] = request.budget_usd;
  json plans = json::array();
  for (const Plan& p : result.plans) {
    const PlanLayout& l = p.layout;
    json j = {{"machine", p.machine->name},
              {"nodes", l.nodes},
              {"devices", l.devices()},
              {"dp", l.dp},
              {"tp", l.tp},
              {"pp", l.pp},
              {"micro_batch", l.micro_batch},
              {"zero", l.zero},
              {"recompute", l.recompute},
              {"precision", l.precision},
              {"sequence_parallel", l.sequence_parallel},
              {"schedule", pipeline_schedule_name(l.schedule)},
              {"fits", p.fits},
              {"reason", p.reason},
              {"memory_bytes", p.memory.total()},
              {"device_memory_bytes", p.machine->device_memory_gib * 1073741824.0},
              {"pareto", p.pareto}};
    json memory = json::object();
    for (int c = 0; c < kMemoryCategories; ++c)
      if (p.memory.bytes[c] > 0)
        memory[memory_category_name(static_cast<MemoryCategory>(c))] = p.memory.bytes[c];
    j["memory_by_category"] = memory;
    const auto value_if = [](bool ok, double v) { return ok ? json(v) : json(nullptr); };
    j["step_seconds"] = value_if(p.fits, p.step.total_s);
    j["step"] =
        p.fits ? json{{"compute", p.step.compute_s},     {"tp_comm", p.step.tp_comm_s},
                      {"pipeline", p.step.pipeline_s},   {"dp_comm", p.step.dp_comm_s},
                      {"optimizer", p.step.optimizer_s}, {"micro_batches", p.step.micro_batches}}
               : json(nullptr);
    j["collectives_per_step"] = p.fits ? collectives_json(p.step.collectives) : json(nullptr);
    j["steps"] = value_if(p.fits, p.steps);
    j["hours"] = value_if(p.fits, p.hours);
    j["cost_on_demand"] = value_if(p.fits, p.cost_on_demand);
    j["begin_hour"] = p.begin_hour >= 0 ? json(p.begin_hour) : json(nullptr);
    j["cost_spot"] = value_if(p.fits && p.spot, p.cost_spot);
    j["spot_hours"] = value_if(p.fits && p.spot, p.spot_run.expected_hours);
    j["checkpoint_interval_minutes"] = value_if(p.fits && p.spot, p.spot_run.interval_hours * 60);
    plans.push_back(j);
  }
  out["plans"] = plans;
  const auto index = [](int i) { return i >= 0 ? json(i) : json(nullptr); };
  out["best"] = {{"cheapest", index(result.cheapest)},
                 {"fastest", index(result.fastest)},
                 {"chosen", index(result.chosen)},
                 {"chosen_spot", result.chosen_spot},
                 {"why", result.chosen_why}};
  if (result.chosen >= 0)
    out["best"]["sbatch"] =
        sbatch_line(request, result.plans[static_cast<std::size_t>(result.chosen)],
                    result.chosen_spot, options.config_file);
  return out.dump(1) + "\n";
}

}  // namespace trellis
