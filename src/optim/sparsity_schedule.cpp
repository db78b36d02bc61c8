#include "trellis/optim/sparsity_schedule.hpp"

namespace trellis {

double SparsitySchedule::target(std::int64_t t) const {
  if (t < start_step) return 0.0;
  if (t >= end_step) return final;
  const double progress =
      static_cast<double>(t - start_step) / static_cast<double>(end_step - start_step);
  const double left = 1.0 - progress;
  return final + (initial - final) * left * left * left;
}

bool SparsitySchedule::due(std::int64_t t) const {
  if (t < start_step || t > end_step) return false;
  return t == end_step || (t - start_step) % frequency == 0;
}

}  // namespace trellis
