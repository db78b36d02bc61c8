#include "trellis/train/loop/pruner.hpp"

#include "trellis/comm/mpi_check.hpp"
#include "trellis/core/error.hpp"
#include "trellis/kernels/sparsity.hpp"
#include "trellis/kernels/vector_ops.hpp"
#include "trellis/parallel/tensor_ownership.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace trellis {

namespace {

std::int64_t logical_numel(const nn::ParamInfo& info) {
  return std::accumulate(info.logical_shape.begin(), info.logical_shape.end(), std::int64_t{1},
                         std::multiplies<>());
}

// How many of n elements a sparsity s prunes: round half to even, as Python's round() in
// torch.nn.utils.prune.
std::int64_t pruned_count(double s, std::int64_t n) {
  return static_cast<std::int64_t>(std::nearbyint(s * static_cast<double>(n)));
}

std::vector<float> to_host_copy(kernels::ConstVector x) {
  const auto host = Kokkos::create_mirror_view_and_copy(HostSpace(), x);
  return std::vector<float>(host.data(), host.data() + host.extent(0));
}

std::vector<double> unit_square_norms(const nn::ParamInfo& info, const std::vector<float>& piece) {
  const std::int64_t rows = info.logical_shape.at(0);
  return kernels::row_square_norms(piece, info.shard.index_map(info.logical_shape), rows,
                                   logical_numel(info) / rows);
}

}  // namespace

Pruner::Pruner(const PruneConfig& config, std::int64_t total_steps, const ProcessGrid& grid,
               TrainingModel& model)
    : enabled_(config.method != "none"),
      structured_(config.method == "structured"),
      global_(config.scope == "global"),
      grid_(grid),
      model_(model) {
  if (!enabled_) return;
  schedule_.initial = config.initial_sparsity;
  schedule_.final = config.final_sparsity;
  schedule_.start_step = config.start_step;
  schedule_.end_step = config.end_step == 0 ? total_steps : config.end_step;
  schedule_.frequency = config.frequency;
  if (schedule_.end_step < schedule_.start_step)
    throw ConfigError(
        "config key prune.start_step = " + std::to_string(config.start_step) +
        " is after the end of pruning (prune.end_step = " + std::to_string(config.end_step) +
        ", the run has " + std::to_string(total_steps) +
        " steps): use a start_step <= " + std::to_string(schedule_.end_step));
  find_targets();
  const GradientSync& sync = model_.sync();
  if (sync.params_sharded()) {  // ZeRO-3: the masks live beside the shard, in update space
    update_mask_ = FloatView("trellis::prune::update_mask", sync.update_size());
    kernels::fill(update_mask_, 1.0f);
    return;
  }
  masks_ = FloatView("trellis::prune::masks", model_.store().buffer_size());
  kernels::fill(masks_, 1.0f);
  if (sync.sharded()) {
    update_mask_ = FloatView("trellis::prune::update_mask", sync.update_size());
    refresh_update_mask();
  } else {
    update_mask_ = masks_;
  }
}

void Pruner::find_targets() {
  const nn::ParameterStore& store = model_.store();
  if (!structured_) {
    for (std::size_t i = 0; i < store.size(); ++i) {
      const nn::ParamInfo& info = store.info(i);
      if (info.logical_shape.size() >= 2 && info.weight_decay && !model_.is_stage_copy(info.name))
        targets_.push_back(i);
    }
    masked_ = targets_;
    return;
  }
  for (const nn::PrunableUnits& group : model_.model().prunable_units()) {
    Units units{store.index(group.weight), {}};
    const std::int64_t rows = store.info(units.weight).logical_shape.at(0);
    for (const std::string& name : group.followers) {
      units.followers.push_back(store.index(name));
      if (store.info(units.followers.back()).logical_shape != Shape{rows})
        throw Error("prunable units of " + group.weight + ": follower " + name +
                    " is not one entry per unit");
    }
    targets_.push_back(units.weight);
    masked_.push_back(units.weight);
    masked_.insert(masked_.end(), units.followers.begin(), units.followers.end());
    units_.push_back(std::move(units));
  }
}

bool Pruner::counts_here(std::size_t target) const {
  const nn::ParamInfo& info = model_.store().info(target);
  return owns_piece(info.shard.sharded(), model_.is_stage_copy(info.name), DpCopies::distinct,
                    grid_.coords());
}

std::vector<Pruner::Held> Pruner::held(std::size_t t) const {
  const nn::ParamInfo& info = model_.store().info(t);
  const GradientSync& sync = model_.sync();
  if (!sync.params_sharded())
    return {{model_.store().param_vector(t), slice(masks_, info.offset, info.offset + info.numel),
             0, info.numel}};
  std::vector<Held> out;
  for (const GradientSync::ShardRange& range : sync.shard_ranges()) {
    const std::size_t first = std::max(info.offset, range.flat_begin);
    const std::size_t end = std::min(info.offset + info.numel, range.flat_end);
    if (first >= end) continue;
    const std::size_t local = range.shard_offset + (first - range.flat_begin);
    out.push_back({slice(sync.shard_params(), local, local + (end - first)),
                   slice(update_mask_, local, local + (end - first)), first - info.offset,
                   end - info.offset});
  }
  return out;
}

void Pruner::sum_over_holders(std::vector<long long>& counts, bool over_stages) const {
  const int n = static_cast<int>(counts.size());
  TRELLIS_MPI(
      MPI_Allreduce(MPI_IN_PLACE, counts.data(), n, MPI_LONG_LONG, MPI_SUM, grid_.tp().get()));
  if (over_stages)
    TRELLIS_MPI(
        MPI_Allreduce(MPI_IN_PLACE, counts.data(), n, MPI_LONG_LONG, MPI_SUM, grid_.pp().get()));
  if (model_.sync().params_sharded())
    TRELLIS_MPI(MPI_Allreduce(MPI_IN_PLACE, counts.data(), n, MPI_LONG_LONG, MPI_SUM,
                              model_.shard_group().get()));
}

void Pruner::refresh_update_mask() {
  if (!model_.sync().sharded() || model_.sync().params_sharded()) return;
  for (const GradientSync::ShardRange& range : model_.sync().shard_ranges()) {
    const std::size_t length = range.flat_end - range.flat_begin;
    Kokkos::deep_copy(slice(update_mask_, range.shard_offset, range.shard_offset + length),
                      slice(masks_, range.flat_begin, range.flat_end));
  }
}

void Pruner::mask_gradients(FloatView update_grads) const {
  if (enabled_) kernels::apply_mask(update_mask_, update_grads);
}

void Pruner::mask_updated_params(const std::vector<ParamWindow>& windows) const {
  if (!enabled_) return;
  for (const ParamWindow& w : windows)
    kernels::apply_mask(slice(update_mask_, w.begin, w.end), slice(w.params, w.begin, w.end));
}

bool Pruner::after_step(std::int64_t completed) {
  if (!enabled_ || !schedule_.due(completed)) return false;
  const double target = schedule_.target(completed);
  if (structured_)
    prune_units(target);
  else
    prune_magnitudes(target);
  refresh_update_mask();
  zero_pruned();
  return true;
}

void Pruner::prune_magnitudes(double target) {
  const nn::ParameterStore& store = model_.store();
  std::vector<std::vector<std::size_t>> groups;
  std::vector<std::int64_t> ks;
  if (global_) {
    long long total = 0;
    for (const std::size_t t : targets_) total += logical_numel(store.info(t));
    TRELLIS_MPI(MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_LONG_LONG, MPI_SUM, grid_.pp().get()));
    groups.push_back(targets_);
    ks.push_back(pruned_count(target, total));
  } else {
    for (const std::size_t t : targets_) {
      groups.push_back({t});
      ks.push_back(pruned_count(target, logical_numel(store.info(t))));
    }
  }
  // Counts over the ranks holding pieces: the tp group (and, global, the pipeline stages).
  const std::vector<std::uint32_t> bits = kernels::kth_magnitude_bits(
      ks, [&](const std::vector<std::uint32_t>& probes, std::vector<long long>& counts) {
        for (std::size_t g = 0; g < groups.size(); ++g) {
          counts[g] = 0;
          for (const std::size_t t : groups[g])
            if (counts_here(t))
              for (const Held& h : held(t))
                counts[g] += kernels::count_magnitudes_at_most(h.params, probes[g]);
        }
        sum_over_holders(counts, global_);
      });
  for (std::size_t g = 0; g < groups.size(); ++g)
    for (const std::size_t t : groups[g])
      for (const Held& h : held(t)) {
        if (bits[g] == kernels::kPruneNothing)
          kernels::fill(h.mask, 1.0f);
        else
          kernels::magnitude_mask(h.params, bits[g], h.mask);
      }
}

void Pruner::prune_units(double target) {
  const nn::ParameterStore& store = model_.store();
  for (const Units& units : units_) {
    const nn::ParamInfo& info = store.info(units.weight);
    // Squared norms of every logical row, from this rank's piece (tp pieces split rows or
    // columns: either way the squares add up over the tp group).
    // ZeRO-3: this rank's ranges of the piece, zeros elsewhere; the shard group adds up.
    std::vector<float> piece;
    if (counts_here(units.weight)) {
      piece.assign(info.numel, 0.0f);
      for (const Held& h : held(units.weight)) {
        const std::vector<float> values = to_host_copy(h.params);
        std::copy(values.begin(), values.end(),
                  piece.begin() + static_cast<std::ptrdiff_t>(h.begin));
      }
    }
    std::vector<double> norms = unit_square_norms(info, piece);
    TRELLIS_MPI(MPI_Allreduce(MPI_IN_PLACE, norms.data(), static_cast<int>(norms.size()),
                              MPI_DOUBLE, MPI_SUM, grid_.tp().get()));
    if (model_.sync().params_sharded())
      TRELLIS_MPI(MPI_Allreduce(MPI_IN_PLACE, norms.data(), static_cast<int>(norms.size()),
                                MPI_DOUBLE, MPI_SUM, model_.shard_group().get()));
    const std::vector<float> keep =
        kernels::units_kept(norms, pruned_count(target, static_cast<std::int64_t>(norms.size())));
    set_unit_mask(info, keep);
    for (const std::size_t t : units.followers) set_unit_mask(store.info(t), keep);
  }
}

void Pruner::set_unit_mask(const nn::ParamInfo& info, const std::vector<float>& keep) {
  const std::uint64_t row_size =
      static_cast<std::uint64_t>(logical_numel(info) / info.logical_shape.at(0));
  const kernels::ShardIndexMap map = info.shard.index_map(info.logical_shape);
  for (const Held& h : held(model_.store().index(info.name))) {
    const auto host = Kokkos::create_mirror_view(HostSpace(), h.mask);
    for (std::size_t e = h.begin; e < h.end; ++e) host(e - h.begin) = keep[map(e) / row_size];
    Kokkos::deep_copy(h.mask, host);
  }
}

void Pruner::zero_pruned() {
  if (model_.sync().params_sharded())
    kernels::apply_mask(update_mask_, model_.sync().shard_params());
  else
    kernels::apply_mask(masks_, model_.store().params());
  for (const auto& [name, state] : model_.optimizer().state())
    kernels::apply_mask(update_mask_, state);
}

void Pruner::save(std::vector<TensorPiece>& pieces, CheckpointInfo& info) {
  if (!enabled_) return;
  for (TensorPiece& piece : mask_pieces()) pieces.push_back(std::move(piece));
  info.counters["prune_masks"] = checkpoint_kind();
}

std::string Pruner::pieces_to_load(const std::string& dir, const CheckpointInfo& info,
                                   std::vector<TensorPiece>& pieces) {
  const auto stored = info.counters.find("prune_masks");
  loading_ = enabled_ && stored != info.counters.end() && stored->second == checkpoint_kind();
  if (loading_)
    for (TensorPiece& piece : mask_pieces()) pieces.push_back(std::move(piece));
  if (enabled_ && stored != info.counters.end() && !loading_)
    return dir + ": its pruning masks are of another prune.method; this run starts its own";
  return "";
}

void Pruner::loaded(const CheckpointInfo&) {
  if (!loading_) return;
  loading_ = false;
  refresh_update_mask();
  zero_pruned();
}

std::vector<LayerSparsity> Pruner::sparsity() const {
  if (!enabled_) return {};
  const nn::ParameterStore& store = model_.store();
  std::vector<long long> zeros(targets_.size(), 0);
  for (std::size_t j = 0; j < targets_.size(); ++j)
    if (counts_here(targets_[j]))
      for (const Held& h : held(targets_[j])) zeros[j] += kernels::count_zeros(h.mask);
  sum_over_holders(zeros, false);
  std::vector<LayerSparsity> layers;
  for (std::size_t j = 0; j < targets_.size(); ++j) {
    const nn::ParamInfo& info = store.info(targets_[j]);
    layers.push_back({info.name, zeros[j], logical_numel(info)});
  }
  return layers;
}

std::vector<TensorPiece> Pruner::mask_pieces() const {
  std::vector<TensorPiece> pieces;
  if (!enabled_) return pieces;
  const nn::ParameterStore& store = model_.store();
  // ZeRO-3: each rank's ranges of each piece (as its parameters are, model_pieces.hpp).
  const bool sharded = model_.sync().params_sharded();
  const DpCopies dp = sharded ? DpCopies::distinct : DpCopies::identical;
  for (const std::size_t t : masked_) {
    const nn::ParamInfo& info = store.info(t);
    for (const Held& h : held(t)) {
      TensorPiece piece;
      piece.name = "masks/" + info.name;
      piece.logical_shape = info.logical_shape;
      piece.shard = info.shard;
      piece.writer = owns_piece(info.shard.sharded(), false, dp, grid_.coords()) &&
                     (!sharded || model_.sync().replica_rank() == 0);
      if (h.begin != 0 || h.end != info.numel) {
        piece.range_begin = h.begin;
        piece.range_end = h.end;
      }
      piece.local = h.mask;
      pieces.push_back(std::move(piece));
    }
  }
  return pieces;
}

}  // namespace trellis
