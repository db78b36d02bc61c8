// ParameterStore: units and the placement of logical ranges in physical buffers (ZeRO-2/3).
#include "trellis/core/error.hpp"
#include "trellis/nn/parameter_store.hpp"

#include <algorithm>

namespace trellis::nn {

void ParameterStore::set_unit_alignment(std::size_t floats) {
  if (!infos_.empty() || finalized_)
    throw Error("ParameterStore::set_unit_alignment() after the first add()");
  TRELLIS_REQUIRE(floats % kAlignment == 0, "unit alignment " + std::to_string(floats) +
                                                " is not a multiple of " +
                                                std::to_string(kAlignment));
  unit_alignment_ = floats;
}

std::size_t ParameterStore::begin_unit() {
  if (finalized_) throw Error("ParameterStore::begin_unit() after finalize()");
  if (replica_) {
    TRELLIS_REQUIRE(replica_units_ < units_.size(),
                    "ParameterStore::begin_unit(): a replica has more units than the original");
    replica_cursor_ = units_[replica_units_].begin;
    return replica_units_++;
  }
  if (unit_alignment_ > 0) pad_to_multiple(unit_alignment_);
  units_.push_back(UnitRange{buffer_size_, buffer_size_});
  return units_.size() - 1;
}

void ParameterStore::end_unit() {
  if (replica_) return;
  TRELLIS_REQUIRE(!units_.empty(), "ParameterStore::end_unit() without begin_unit()");
  if (unit_alignment_ > 0) pad_to_multiple(unit_alignment_);
  units_.back().end = buffer_size_;
}

bool ParameterStore::in_unit(std::size_t i) const {
  const std::size_t offset = info(i).offset;
  return std::any_of(units_.begin(), units_.end(), [&](const UnitRange& unit) {
    return offset >= unit.begin && offset < unit.end;
  });
}

void ParameterStore::place(std::vector<Placement> params, std::size_t param_floats,
                           std::vector<Placement> grads, std::size_t grad_floats) {
  if (finalized_) throw Error("ParameterStore::place() after finalize()");
  param_placement_ = std::move(params);
  grad_placement_ = std::move(grads);
  param_floats_ = param_placement_.empty() ? buffer_size_ : param_floats;
  grad_floats_ = grad_placement_.empty() ? buffer_size_ : grad_floats;
}

std::size_t ParameterStore::physical(const std::vector<Placement>& placement, std::size_t offset,
                                     std::size_t numel, const std::string& name) {
  if (placement.empty()) return offset;
  for (const Placement& range : placement)
    if (offset >= range.logical_begin && offset + numel <= range.logical_end)
      return range.physical_begin + (offset - range.logical_begin);
  throw Error("ParameterStore: no placement holds \"" + name + "\" [" + std::to_string(offset) +
              ", " + std::to_string(offset + numel) + ")");
}

void ParameterStore::resolve_placement() {
  param_at_.clear();
  grad_at_.clear();
  for (const ParamInfo& p : infos_) {
    param_at_.push_back(physical(param_placement_, p.offset, p.numel, p.name));
    grad_at_.push_back(physical(grad_placement_, p.offset, p.numel, p.name));
    TRELLIS_REQUIRE(
        param_at_.back() + p.numel <= param_floats_ && grad_at_.back() + p.numel <= grad_floats_,
        "ParameterStore: \"" + p.name + "\" placed beyond the physical buffers");
  }
}

}  // namespace trellis::nn
