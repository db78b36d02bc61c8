#include "trellis/train/plan/run_cost.hpp"

#include <algorithm>
#include <cmath>

namespace trellis {

double young_daly_interval_hours(double save_hours, double mtbi_hours) {
  if (mtbi_hours <= 0) return 0;
  return std::min(std::sqrt(2 * save_hours * mtbi_hours), mtbi_hours);
}

SpotRun spot_run(double work_hours, double save_hours, double restart_hours, double mtbi_hours) {
  SpotRun run;
  run.save_hours = save_hours;
  run.interval_hours = young_daly_interval_hours(save_hours, mtbi_hours);
  if (run.interval_hours <= 0 || work_hours <= 0) {
    run.expected_hours = work_hours;
    return run;
  }
  const double tau = run.interval_hours, segment = tau + save_hours;
  const double without_loss = work_hours / tau * segment;
  run.expected_hours = without_loss * (1 + (restart_hours + segment / 2) / mtbi_hours);
  run.lost_hours = run.expected_hours - without_loss;
  return run;
}

double windowed_cost(const MachineType& machine, double price, int devices, double hours,
                     int start_hour) {
  if (machine.price_windows.empty()) return price * devices * hours;
  // Whole days cost the daily mean; the remainder is summed hour by hour.
  double day = 0;
  for (int h = 0; h < 24; ++h) day += machine.price_multiplier(h);
  const double days = std::floor(hours / 24);
  double rest = hours - 24 * days, weighted = days * day;
  for (int h = start_hour; rest > 0; ++h) {
    const double part = std::min(1.0, rest);
    weighted += part * machine.price_multiplier(h % 24);
    rest -= part;
  }
  return price * devices * weighted;
}

BestStart cheapest_start(const MachineType& machine, double price, int devices, double hours) {
  BestStart best{0, windowed_cost(machine, price, devices, hours, 0)};
  for (int h = 1; h < 24; ++h) {
    const double cost = windowed_cost(machine, price, devices, hours, h);
    if (cost < best.cost - 1e-9) best = {h, cost};
  }
  return best;
}

}  // namespace trellis
