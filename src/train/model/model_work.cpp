#include "trellis/train/model/model_work.hpp"

namespace trellis {

double unit_flops(const UnitWork& unit) {
  double flops = unit.attention_flops;
  for (const ConvWork& c : unit.convs) flops += c.flops;
  for (const GemmWork& g : unit.gemms) flops += 2 * g.m * g.n * g.k * (g.input_grad ? 3 : 2);
  return flops;
}

double work_flops(const ModelWork& work) {
  double flops = 0;
  for (const UnitWork& unit : work.units) flops += unit_flops(unit);
  return flops;
}

}  // namespace trellis
