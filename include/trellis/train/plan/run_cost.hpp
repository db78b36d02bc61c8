// What a run costs in time and money once its step time is known: on demand, and on spot nodes
// that are interrupted, with the checkpoint interval that minimises the expected time (Young /
// Daly), and the start hour that a machine's price windows make cheapest (sbatch --begin).
//
// Spot: interruptions of the job arrive at rate nodes / spot_mtbi_hours (any node lost stops
// it). With a checkpoint every tau hours taking delta to save, Young's interval is
// tau = sqrt(2 delta M) for the job's mean time between interruptions M, and the expected
// wall time of W hours of work is (Daly's first-order model)
//   W / tau x (tau + delta) x (1 + (R + (tau + delta) / 2) / M)
// with R the restart (a new node, the job start and the checkpoint load): every segment of
// tau + delta is interrupted with probability (tau + delta) / M, losing on average half of
// it and the restart.
#pragma once

#include "trellis/train/plan/machine_type.hpp"

namespace trellis {

// sqrt(2 x save_hours x mtbi_hours), at most mtbi_hours (Daly's bound).
double young_daly_interval_hours(double save_hours, double mtbi_hours);

struct SpotRun {
  double interval_hours = 0;  // between checkpoints
  double expected_hours = 0;  // wall time, interruptions and saves included
  double lost_hours = 0;      // of that, work redone and restarts
  double save_hours = 0;      // the time saving one checkpoint
};
SpotRun spot_run(double work_hours, double save_hours, double restart_hours, double mtbi_hours);

// The money of `hours` on `devices` at `price` per device-hour, starting at UTC hour
// start_hour, with the machine's price windows applied hour by hour.
double windowed_cost(const MachineType& machine, double price, int devices, double hours,
                     int start_hour);

// The start hour (0-23 UTC) of the lowest windowed_cost and that cost.
struct BestStart {
  int hour = 0;
  double cost = 0;
};
BestStart cheapest_start(const MachineType& machine, double price, int devices, double hours);

}  // namespace trellis
