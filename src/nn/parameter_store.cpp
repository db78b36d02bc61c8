#include "trellis/nn/parameter_store.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/host_simd.hpp"
#include "trellis/core/rng.hpp"
#include "trellis/kernels/random_fill.hpp"
#include "trellis/kernels/vector_ops.hpp"

namespace trellis::nn {

ShardSpec ShardSpec::split(int dim, int parts, int index, int sections) {
  TRELLIS_REQUIRE(dim >= 0 && parts >= 1 && index >= 0 && index < parts && sections >= 1,
                  "bad shard spec");
  ShardSpec s;
  s.dim = dim;
  s.parts = parts;
  s.index = index;
  s.sections = sections;
  return s;
}

bool ShardSpec::divides(const Shape& logical) const {
  for (std::int64_t d : logical)
    if (d < 0) return false;
  if (!sharded()) return true;
  if (static_cast<std::size_t>(dim) >= logical.size()) return false;
  const std::int64_t divisor = static_cast<std::int64_t>(sections) * parts;
  return sections >= 1 && logical[static_cast<std::size_t>(dim)] % divisor == 0;
}

Shape ShardSpec::piece_shape(const Shape& logical) const {
  for (std::int64_t d : logical)
    if (d < 0) throw Error("negative extent in shape " + shape_string(logical));
  if (!sharded()) return logical;
  if (static_cast<std::size_t>(dim) >= logical.size() || index < 0 || index >= parts ||
      sections < 1)
    throw Error("bad shard spec (dim " + std::to_string(dim) + ", parts " + std::to_string(parts) +
                ", index " + std::to_string(index) + ", sections " + std::to_string(sections) +
                ") for shape " + shape_string(logical));
  if (!divides(logical))
    throw Error("shape " + shape_string(logical) + ": dim " + std::to_string(dim) +
                " cannot be split " + std::to_string(sections) + " x " + std::to_string(parts) +
                " ways");
  Shape piece = logical;
  piece[static_cast<std::size_t>(dim)] = logical[static_cast<std::size_t>(dim)] / parts;
  return piece;
}

kernels::ShardIndexMap ShardSpec::index_map(const Shape& logical) const {
  piece_shape(logical);  // validates
  kernels::ShardIndexMap map;
  if (!sharded()) return map;
  const auto d = static_cast<std::size_t>(dim);
  std::uint64_t inner = 1;
  for (std::size_t k = d + 1; k < logical.size(); ++k)
    inner *= static_cast<std::uint64_t>(logical[k]);
  map.inner = inner;
  map.sections = static_cast<std::uint64_t>(sections);
  map.parts = static_cast<std::uint64_t>(parts);
  map.index = static_cast<std::uint64_t>(index);
  map.piece = static_cast<std::uint64_t>(logical[d]) / (map.sections * map.parts);
  return map;
}

namespace {

Shape local_shape(const std::string& name, const Shape& logical, const ShardSpec& shard) {
  if (!shard.sharded()) return shard.piece_shape(logical);  // throws on negative extents
  TRELLIS_REQUIRE(static_cast<std::size_t>(shard.dim) < logical.size(),
                  "\"" + name + "\": shard dim out of range");
  if (!shard.divides(logical))
    throw ConfigError(
        "parameter \"" + name + "\" " + shape_string(logical) + ": dim " +
        std::to_string(shard.dim) + " (" +
        std::to_string(logical[static_cast<std::size_t>(shard.dim)]) + ") cannot be split " +
        (shard.sections > 1 ? std::to_string(shard.sections) + " x " : "") +
        std::to_string(shard.parts) + " ways (parallel.tp = " + std::to_string(shard.parts) + ")");
  return shard.piece_shape(logical);
}

}  // namespace

std::size_t ParameterStore::add(const std::string& name, const Shape& shape, const InitSpec& init,
                                bool weight_decay) {
  return add(name, shape, init, weight_decay, ShardSpec{});
}

void ParameterStore::begin_replica(std::size_t offset) {
  if (finalized_) throw Error("ParameterStore::begin_replica() after finalize()");
  TRELLIS_REQUIRE(!replica_, "begin_replica() inside a replica");
  replica_ = true;
  replica_cursor_ = offset;
  replica_units_ = 0;
}

void ParameterStore::end_replica() {
  TRELLIS_REQUIRE(replica_, "end_replica() without begin_replica()");
  replica_ = false;
}

void ParameterStore::pad_to_multiple(std::size_t multiple) {
  if (finalized_) throw Error("ParameterStore::pad_to_multiple() after finalize()");
  TRELLIS_REQUIRE(multiple > 0, "pad_to_multiple(0)");
  buffer_size_ = (buffer_size_ + multiple - 1) / multiple * multiple;
}

std::size_t ParameterStore::add(const std::string& name, const Shape& logical_shape,
                                const InitSpec& init, bool weight_decay, const ShardSpec& shard) {
  if (finalized_) throw Error("ParameterStore::add(\"" + name + "\") after finalize()");
  if (name.empty()) throw Error("ParameterStore::add: empty parameter name");
  if (replica_) {
    const auto it = by_name_.find(name);
    if (it == by_name_.end())
      throw Error("ParameterStore::add(\"" + name +
                  "\"): a replica registers a parameter the "
                  "original does not have");
    const ParamInfo& p = infos_[it->second];
    if (p.logical_shape != logical_shape || p.shard.dim != (shard.sharded() ? shard.dim : -1))
      throw Error("ParameterStore::add(\"" + name + "\"): the replica's shape " +
                  shape_string(logical_shape) + " differs from the original's " +
                  shape_string(p.logical_shape));
    replica_cursor_ = p.offset + (p.numel + kAlignment - 1) / kAlignment * kAlignment;
    return it->second;
  }
  if (by_name_.count(name))
    throw Error("ParameterStore::add: duplicate parameter \"" + name + "\"");
  ParamInfo p;
  p.name = name;
  p.shape = local_shape(name, logical_shape, shard);  // throws on negative extents
  p.logical_shape = logical_shape;
  p.shard = shard.sharded() ? shard : ShardSpec{};
  p.numel = static_cast<std::size_t>(shape_numel(p.shape));
  p.offset = buffer_size_;
  p.weight_decay = weight_decay;
  p.init = init;
  buffer_size_ += (p.numel + kAlignment - 1) / kAlignment * kAlignment;
  num_elements_ += static_cast<std::int64_t>(p.numel);
  by_name_.emplace(name, infos_.size());
  infos_.push_back(std::move(p));
  return infos_.size() - 1;
}

void ParameterStore::finalize(std::uint64_t seed, float* grad_memory, float* param_memory) {
  if (finalized_) throw Error("ParameterStore::finalize() called twice");
  if (!kHostMemory && (grad_memory != nullptr || param_memory != nullptr))
    throw Error("ParameterStore::finalize(): external parameter memory needs a host build");
  if (!params_placed() && grad_placement_.empty()) param_floats_ = grad_floats_ = buffer_size_;
  if ((params_placed() || !grad_placement_.empty()) &&
      (grad_memory != nullptr || param_memory != nullptr))
    throw Error("ParameterStore::finalize(): placed buffers live in the store's own memory");
  seed_ = seed;
  resolve_placement();
  // View construction zero-fills: padding and gradients start at 0. Views of the caller's
  // memory are unmanaged (the caller owns it) and zeroed here.
  // The caller's memory (a node's shared window) is no Kokkos allocation: the ledger is told.
  const auto buffer = [&](float* memory, const std::string& label, TrackedBytes& tracked) {
    const std::size_t floats = memory == grad_memory ? grad_floats_ : param_floats_;
    if (memory == nullptr) return FloatView(label, floats);
    tracked = TrackedBytes(label, static_cast<std::int64_t>(floats * sizeof(float)));
    const FloatView view(memory, floats);
    Kokkos::deep_copy(view, 0.0f);
    return view;
  };
  params_ = param_memory != nullptr ? buffer(param_memory, "trellis::params", external_params_)
                                    : FloatView("trellis::params", param_floats_);
  grads_ = grad_memory != nullptr ? buffer(grad_memory, "trellis::grads", external_grads_)
                                  : FloatView("trellis::grads", grad_floats_);
  decay_mask_ = MaskView("trellis::decay_mask", buffer_size_);
  if (autocast_.active() && autocast_.native)
    compute_half_ = kernels::HalfView("trellis::compute_params_16", param_floats_);
  else if (autocast_.active())
    compute_params_ = FloatView("trellis::compute_params", param_floats_);
  finalized_ = true;
  for (std::size_t i = 0; i < infos_.size(); ++i) {
    if (!params_placed() || !in_unit(i)) initialize(i);
    if (infos_[i].weight_decay)
      Kokkos::deep_copy(
          Kokkos::subview(decay_mask_,
                          std::make_pair(infos_[i].offset, infos_[i].offset + infos_[i].numel)),
          std::uint8_t{1});
  }
  refresh_compute_copy(0);
}

void ParameterStore::initialize(std::size_t i) {
  require_finalized("initialize");
  initialize_range(i, 0, info(i).numel, param_vector(i));
}

void ParameterStore::initialize_range(std::size_t i, std::size_t begin, std::size_t end,
                                      kernels::Vector x) const {
  const ParamInfo& p = info(i);
  TRELLIS_REQUIRE(begin <= end && end <= p.numel && x.extent(0) == end - begin,
                  "ParameterStore::initialize_range: [" + std::to_string(begin) + ", " +
                      std::to_string(end) + ") of \"" + p.name + "\"");
  const std::uint64_t stream = stream_from_name(p.name);
  kernels::ShardIndexMap map = p.shard.index_map(p.logical_shape);
  map.skip = begin;
  using Kind = InitSpec::Kind;
  switch (p.init.kind) {
    case Kind::zeros:
      kernels::fill(x, 0.0f);
      break;
    case Kind::constant:
      kernels::fill(x, static_cast<float>(p.init.value));
      break;
    case Kind::uniform:
      kernels::fill_uniform(x, static_cast<float>(p.init.lo), static_cast<float>(p.init.hi), seed_,
                            stream, map);
      break;
    case Kind::normal:
      kernels::fill_normal(x, static_cast<float>(p.init.mean), static_cast<float>(p.init.stddev),
                           seed_, stream, map);
      break;
    case Kind::kaiming_uniform:
    case Kind::xavier_uniform: {
      const float bound = static_cast<float>(p.init.uniform_bound());
      kernels::fill_uniform(x, -bound, bound, seed_, stream, map);
      break;
    }
  }
}

const ParamInfo& ParameterStore::info(std::size_t i) const {
  if (i >= infos_.size()) {
    throw Error("ParameterStore: parameter index " + std::to_string(i) + " out of range (" +
                std::to_string(infos_.size()) + " parameters)");
  }
  return infos_[i];
}

std::optional<std::size_t> ParameterStore::find(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

std::size_t ParameterStore::index(const std::string& name) const {
  auto i = find(name);
  if (!i) throw Error("ParameterStore: no parameter named \"" + name + "\"");
  return *i;
}

void ParameterStore::require_finalized(const char* what) const {
  if (!finalized_) {
    throw Error(std::string("ParameterStore::") + what + "() before finalize()");
  }
}

const FloatView& ParameterStore::params() const {
  require_finalized("params");
  return params_;
}

const FloatView& ParameterStore::grads() const {
  require_finalized("grads");
  return grads_;
}

const MaskView& ParameterStore::decay_mask() const {
  require_finalized("decay_mask");
  TRELLIS_REQUIRE(decay_mask_.extent(0) == buffer_size_,
                  "ParameterStore::decay_mask() after release_decay_mask()");
  return decay_mask_;
}

FloatView ParameterStore::param(std::size_t i) const {
  require_finalized("param");
  return slice(params_, param_at_[i], param_at_[i] + info(i).numel);
}

FloatView ParameterStore::grad(std::size_t i) const {
  require_finalized("grad");
  return slice(grads_, grad_at_[i], grad_at_[i] + info(i).numel);
}

kernels::Vector ParameterStore::param_window(const FloatView& buffer, std::size_t i,
                                             bool grads) const {
  return kernels::Vector(buffer.data() + (grads ? grad_at_[i] : param_at_[i]), info(i).numel);
}

kernels::Vector ParameterStore::param_vector(std::size_t i) const {
  require_finalized("param_vector");
  return param_window(params_, i);
}

kernels::Vector ParameterStore::grad_vector(std::size_t i) const {
  require_finalized("grad_vector");
  return param_window(grads_, i, true);
}

Matrix ParameterStore::matrix_window(const FloatView& buffer, std::size_t i, bool grads) const {
  const ParamInfo& p = info(i);
  if (p.shape.size() != 2) {
    throw Error("ParameterStore: \"" + p.name + "\" has shape " + shape_string(p.shape) +
                ", not a matrix");
  }
  return Matrix(buffer.data() + (grads ? grad_at_[i] : param_at_[i]),
                static_cast<std::size_t>(p.shape[0]), static_cast<std::size_t>(p.shape[1]));
}

Matrix ParameterStore::param_matrix(std::size_t i) const {
  require_finalized("param_matrix");
  return matrix_window(params_, i);
}

Matrix ParameterStore::grad_matrix(std::size_t i) const {
  require_finalized("grad_matrix");
  return matrix_window(grads_, i, true);
}

void ParameterStore::zero_grads() {
  require_finalized("zero_grads");
  kernels::fill(grads_, 0.0f);
}

}  // namespace trellis::nn
