#include "trellis/train/loop/checkpoint_parts.hpp"

#include "trellis/comm/mpi_check.hpp"
#include "trellis/core/error.hpp"

#include <cstring>

namespace trellis {

namespace {

std::int64_t counter(const CheckpointInfo& info, const char* key, std::int64_t missing) {
  const auto it = info.counters.find(key);
  return it == info.counters.end() ? missing : it->second;
}

}  // namespace

TensorPiece PowerSgdCheckpoint::state_piece() {
  auto row = static_cast<long long>(sync_.powersgd()->state_floats());
  TRELLIS_MPI(MPI_Allreduce(MPI_IN_PLACE, &row, 1, MPI_LONG_LONG, MPI_MAX, grid_.world().get()));
  const auto length = static_cast<std::size_t>(row);
  if (staging_.extent(0) != length)
    staging_ = FloatView("trellis::checkpoint::powersgd_row", length);
  TensorPiece piece;
  piece.name = "powersgd/state";
  piece.logical_shape = {grid_.world().size(), static_cast<std::int64_t>(length)};
  const auto rank = static_cast<std::size_t>(grid_.rank());
  piece.range_begin = rank * length;
  piece.range_end = (rank + 1) * length;
  piece.writer = true;
  piece.local = staging_;
  return piece;
}

bool PowerSgdCheckpoint::fits(const CheckpointInfo& info) const {
  return sync_.powersgd() != nullptr &&
         counter(info, "powersgd_world", -1) == grid_.world().size() &&
         counter(info, "powersgd_tp", -1) == config_.parallel.tp &&
         counter(info, "powersgd_pp", -1) == config_.parallel.pp &&
         counter(info, "powersgd_rank", -1) == config_.parallel.powersgd_rank &&
         counter(info, "powersgd_min_compression_x1000", -1) ==
             static_cast<std::int64_t>(config_.parallel.powersgd_min_compression * 1000);
}

void PowerSgdCheckpoint::save(std::vector<TensorPiece>& pieces, CheckpointInfo& info) {
  if (sync_.powersgd() == nullptr) return;
  TensorPiece piece = state_piece();
  sync_.powersgd()->save_state(piece.local);
  pieces.push_back(std::move(piece));
  // The layout its per-rank state belongs to.
  info.counters["powersgd_world"] = grid_.world().size();
  info.counters["powersgd_tp"] = config_.parallel.tp;
  info.counters["powersgd_pp"] = config_.parallel.pp;
  info.counters["powersgd_rank"] = config_.parallel.powersgd_rank;
  info.counters["powersgd_min_compression_x1000"] =
      static_cast<std::int64_t>(config_.parallel.powersgd_min_compression * 1000);
}

std::string PowerSgdCheckpoint::pieces_to_load(const std::string& dir, const CheckpointInfo& info,
                                               std::vector<TensorPiece>& pieces) {
  loading_ = fits(info);
  if (loading_) pieces.push_back(state_piece());
  if (loading_ || sync_.powersgd() == nullptr) return "";
  return "resume: " + dir +
         " holds no PowerSGD state for this layout; its error feedback restarts at zero and Q "
         "is drawn afresh";
}

void PowerSgdCheckpoint::loaded(const CheckpointInfo&) {
  if (loading_) sync_.powersgd()->load_state(staging_);
  loading_ = false;
}

void LossScalerCheckpoint::save(std::vector<TensorPiece>&, CheckpointInfo& info) {
  if (!scaler_.enabled()) return;
  std::uint32_t bits = 0;  // bit-exact: the float's bits as an integer
  std::memcpy(&bits, &scaler_.state().scale, sizeof bits);
  info.counters["loss_scale_bits"] = bits;
  info.counters["loss_scale_growth_tracker"] = scaler_.state().growth_tracker;
  info.counters["loss_scale_hysteresis_left"] = scaler_.state().hysteresis_left;
  info.counters["loss_scale_overflows"] = scaler_.state().overflows;
}

void LossScalerCheckpoint::loaded(const CheckpointInfo& info) {
  if (!info.counters.count("loss_scale_bits")) return;
  LossScaler::State state;
  const auto bits = static_cast<std::uint32_t>(info.counters.at("loss_scale_bits"));
  std::memcpy(&state.scale, &bits, sizeof bits);
  state.growth_tracker = counter(info, "loss_scale_growth_tracker", 0);
  state.hysteresis_left = counter(info, "loss_scale_hysteresis_left", 0);
  state.overflows = counter(info, "loss_scale_overflows", 0);
  try {
    scaler_.restore(state);
  } catch (const Error& e) {
    throw InputError(std::string(e.what()));
  }
}

}  // namespace trellis
