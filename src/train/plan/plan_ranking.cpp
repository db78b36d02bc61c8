// The pricing and ranking half of the search (plan_search.hpp).
#include "trellis/core/format.hpp"
#include "trellis/train/plan/plan_search.hpp"

#include <algorithm>
#include <cmath>

namespace trellis {

namespace {

// The better of on demand and spot for a plan: cost and hours.
struct Offer {
  double cost = 0, hours = 0;
  bool spot = false;
};

Offer best_offer(const Plan& p, double deadline) {
  Offer demand{p.cost_on_demand, p.hours, false};
  if (!p.spot) return demand;
  const Offer spot{p.cost_spot, p.spot_run.expected_hours, true};
  const bool spot_in_time = deadline <= 0 || spot.hours <= deadline;
  return spot_in_time && spot.cost < demand.cost ? spot : demand;
}

}  // namespace

void price_and_rank(const PlanRequest& request, double model_params, int state_buffers,
                    PlanResult& result) {
  const double global = static_cast<double>(request.config.train.global_batch);
  const double steps = std::ceil(request.target_samples / global);
  for (Plan& p : result.plans) {
    if (!p.fits) continue;
    const MachineType& m = *p.machine;
    const int devices = p.layout.devices();
    p.steps = steps;
    p.checkpoint_bytes = model_params * 4 * (1 + state_buffers);
    const double save_hours =
        p.checkpoint_bytes / (m.checkpoint_bandwidth_gbs * 1e9 * p.layout.nodes) / 3600;
    p.hours = steps * p.step.total_s / 3600 + save_hours;  // the final checkpoint
    const double flat = m.price_per_device_hour * devices * p.hours;
    const BestStart start = cheapest_start(m, m.price_per_device_hour, devices, p.hours);
    p.cost_on_demand = start.cost;
    if (start.cost < 0.99 * windowed_cost(m, m.price_per_device_hour, devices, p.hours, 0) &&
        start.cost < flat) {
      p.begin_hour = start.hour;
      p.begin_saving = windowed_cost(m, m.price_per_device_hour, devices, p.hours, 0) - start.cost;
    }
    p.spot = m.has_spot();
    if (p.spot) {
      // A restart also reads the checkpoint back.
      const double restart_hours = m.restart_minutes / 60 + save_hours;
      p.spot_run = spot_run(p.hours - save_hours, save_hours, restart_hours,
                            m.spot_mtbi_hours / p.layout.nodes);
      p.cost_spot = m.spot_price_per_device_hour * devices * p.spot_run.expected_hours;
    }
  }
  // Cheapest first (by the better offer), the plans that do not fit after, in search order.
  std::stable_sort(result.plans.begin(), result.plans.end(), [&](const Plan& a, const Plan& b) {
    if (a.fits != b.fits) return a.fits;
    if (!a.fits) return false;
    const Offer x = best_offer(a, request.deadline_hours),
                y = best_offer(b, request.deadline_hours);
    return x.cost != y.cost ? x.cost < y.cost : x.hours < y.hours;
  });
  double best_hours = 0;
  for (std::size_t i = 0; i < result.plans.size(); ++i) {
    Plan& p = result.plans[i];
    if (!p.fits) break;
    const int index = static_cast<int>(i);
    if (result.cheapest < 0) result.cheapest = index;
    if (result.fastest < 0 || p.hours < best_hours) result.fastest = index, best_hours = p.hours;
    // On-demand Pareto front: no plan at most as slow and as dear, and better in one.
    p.pareto = std::none_of(result.plans.begin(), result.plans.end(), [&](const Plan& q) {
      return q.fits && q.hours <= p.hours && q.cost_on_demand <= p.cost_on_demand &&
             (q.hours < p.hours || q.cost_on_demand < p.cost_on_demand);
    });
    const Offer offer = best_offer(p, request.deadline_hours);
    const bool in_time = request.deadline_hours <= 0 || offer.hours <= request.deadline_hours;
    const bool affordable = request.budget_usd <= 0 || offer.cost <= request.budget_usd;
    if (result.chosen < 0 && in_time && affordable) {
      result.chosen = index;
      result.chosen_spot = offer.spot;
    }
  }
  if (result.chosen >= 0) {
    const Plan& p = result.plans[static_cast<std::size_t>(result.chosen)];
    result.chosen_why =
        "the cheapest plan" +
        std::string(request.deadline_hours > 0
                        ? format_text(" that finishes within %g h", request.deadline_hours)
                        : "") +
        std::string(request.budget_usd > 0
                        ? format_text(" within the budget of $%g", request.budget_usd)
                        : "") +
        (result.chosen_spot ? ", on spot nodes" : ", on demand") +
        (p.begin_hour >= 0 ? format_text(", started at %02d:00 UTC", p.begin_hour) : std::string());
  } else if (result.cheapest >= 0) {
    result.chosen_why = "no plan meets the deadline and the budget";
  } else {
    result.chosen_why = "no plan fits";
  }
}

}  // namespace trellis
