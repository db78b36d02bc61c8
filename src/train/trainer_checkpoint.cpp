// The Trainer's checkpoints: what goes into one (train/checkpoint_file.hpp writes and reads
// it), and resuming from one.
//
// Everything is stored by logical tensor, so a checkpoint loads on any dp x tp x pp layout:
//   params/<name>              the whole parameter (each tp piece written by its dp-rank-0
//                              owner; replicated parameters by tp rank 0; the GPT's tied
//                              table by the first stage only)
//   optim/<state>/<name>       each optimizer state buffer (exp_avg, exp_avg_sq,
//                              momentum_buffer, square_avg) per parameter; ZeRO-1's shards are
//                              gathered over dp first
//   buffers/<name>             BatchNorm running statistics (rank 0's)
// plus the step, the optimizer's step count, the global batch, the resolved config and the
// build. Randomness needs no state: every draw is keyed by (seed, step, position).
#include "trellis/comm/mpi_check.hpp"
#include "trellis/core/error.hpp"
#include "trellis/core/timer.hpp"
#include "trellis/train/agreement.hpp"
#include "trellis/train/build_info.hpp"
#include "trellis/train/checkpoint_file.hpp"
#include "trellis/train/trainer.hpp"

#include <algorithm>
#include <csignal>
#include <cstdio>

namespace trellis {

namespace {

// The keys a checkpoint must agree on (first_model_difference) decide the model's tensors and
// what a step means (the data order and the dropout masks are keyed by seed and step).
void check_compatible(const std::string& dir, const TrainConfig& stored,
                      const TrainConfig& current) {
  const ConfigDifference d = first_model_difference(stored, current);
  if (!d.key.empty())
    throw InputError(dir + ": checkpoint of another model or run: " + d.key + " = " +
                     d.stored_value + " there, " + d.current_value +
                     " here (start a new run.dir, or set ckpt.resume = none)");
}

}  // namespace

std::vector<TensorPiece> Trainer::checkpoint_pieces(std::vector<FloatView>& full_state) {
  const GridCoords& at = grid_->coords();
  const bool first_stage = model_->first_stage();
  std::vector<TensorPiece> pieces;
  auto is_copy = [&](const std::string& name) {
    return !first_stage && std::find(tied_.begin(), tied_.end(), name) != tied_.end();
  };
  auto add = [&](const std::string& name, const nn::ParamInfo& info, FloatView local) {
    TensorPiece piece;
    piece.name = name;
    piece.logical_shape = info.logical_shape;
    piece.shard = info.shard;
    piece.writer = at.dp == 0 && (info.shard.sharded() || at.tp == 0) && !is_copy(info.name);
    piece.local = local;
    pieces.push_back(std::move(piece));
  };
  for (std::size_t i = 0; i < store_.size(); ++i)
    add("params/" + store_.info(i).name, store_.info(i), store_.param(i));
  // Optimizer state: the whole flat buffers ([buffer_size]), windows per parameter.
  const NamedState state = optimizer_->state();
  full_state.clear();
  for (const auto& [state_name, view] : state) {
    FloatView full = view;
    if (sync_->sharded()) {
      full = FloatView("trellis::ckpt::" + state_name, store_.buffer_size());
      sync_->gather_full(view, full);
    }
    full_state.push_back(full);
    for (std::size_t i = 0; i < store_.size(); ++i) {
      const nn::ParamInfo& info = store_.info(i);
      add("optim/" + state_name + "/" + info.name, info,
          slice(full, info.offset, info.offset + info.numel));
    }
  }
  for (const nn::NamedBuffer& buffer : model_->buffers()) {
    TensorPiece piece;
    piece.name = "buffers/" + buffer.name;
    piece.logical_shape = {static_cast<std::int64_t>(buffer.data.extent(0))};
    piece.writer = grid_->rank() == 0;
    piece.local = FloatView(buffer.data.data(), buffer.data.extent(0));
    pieces.push_back(std::move(piece));
  }
  // Pipeline stages pass different lists: write_checkpoint/read_checkpoint take the union and
  // let each rank join the collective calls for the other stages' tensors with no data.
  return pieces;
}

void Trainer::save_checkpoint() {
  watchdog_->beat("checkpoint");
  Stopwatch watch;
  if (config_.fault.inject_kind == "kill_in_checkpoint" &&
      config_.fault.inject_rank == grid_->rank() && global_step_ >= config_.fault.inject_step) {
    log_.warn("fault.inject: rank " + std::to_string(grid_->rank()) +
              " kills itself during the checkpoint write");
    std::raise(SIGKILL);
  }
  std::vector<FloatView> full_state;
  const std::vector<TensorPiece> pieces = checkpoint_pieces(full_state);
  CheckpointInfo info;
  info.step = global_step_;
  info.config_ini = config_.to_ini();
  info.build_info = build_summary();
  info.counters["global_batch"] = config_.train.global_batch;
  info.counters["optimizer_steps"] = optimizer_->step_count();
  info.counters["skipped_steps"] = skipped_steps_;
  const std::string dir =
      write_checkpoint(config_.derived.checkpoint_dir, pieces, info,
                       static_cast<int>(config_.ckpt.keep), grid_->world().get());
  const double seconds = watch.seconds();
  char line[64];
  std::snprintf(line, sizeof(line), " (step %lld, %.2f s)", static_cast<long long>(global_step_),
                seconds);
  log_.info("checkpoint: " + dir + line);
  metrics_->write(JsonLine().add("step", global_step_).add("checkpoint_time_s", seconds));
  watchdog_->beat("step");
}

bool Trainer::resume_if_asked() {
  const std::string& mode = config_.ckpt.resume;
  if (mode == "none") return false;
  const bool automatic = mode == "auto";
  const std::vector<std::string> candidates =
      automatic ? list_checkpoints(config_.derived.checkpoint_dir) : std::vector<std::string>{mode};
  if (candidates.empty()) {
    log_.info("resume: no checkpoint in " + config_.derived.checkpoint_dir +
              ", starting from step 0");
    return false;
  }
  const MPI_Comm world = grid_->world().get();
  for (const std::string& dir : candidates) {
    // An unreadable file is a reason to fall back (auto); agreed over the world first.
    CheckpointInfo info;
    std::string problem;
    try {
      info = read_checkpoint_info(dir);
    } catch (const Error& e) {
      problem = e.what();
    }
    int unreadable = problem.empty() ? 0 : 1;
    TRELLIS_MPI(MPI_Allreduce(MPI_IN_PLACE, &unreadable, 1, MPI_INT, MPI_MAX, world));
    if (unreadable) {
      if (!automatic)
        run_agreed(world, log_, [&] {
          if (!problem.empty()) throw InputError(problem);
        });
      if (grid_->rank() == 0)
        log_.warn("resume: " + dir + " is unusable (" +
                  (problem.empty() ? "unreadable on another rank" : problem) +
                  "); trying an older one");
      continue;
    }
    // Another model's checkpoint is an error, never a fallback.
    run_agreed(world, log_, [&] {
      check_compatible(dir,
                       TrainConfig::from(RawConfig::parse_text(info.config_ini,
                                                               "the config stored in " + dir, {})),
                       config_);
    });
    try {
      watchdog_->beat("resume");
      Stopwatch load_watch;
      verify_checkpoint(dir, world);
      std::vector<FloatView> full_state;
      std::vector<TensorPiece> pieces = checkpoint_pieces(full_state);
      read_checkpoint(dir, pieces, world);
      // ZeRO-1: the optimizer's shards from the whole buffers just read, and the master
      // copy of this rank's parameters.
      if (sync_->sharded()) {
        const NamedState state = optimizer_->state();
        for (std::size_t k = 0; k < state.size(); ++k)
          Kokkos::deep_copy(state[k].second, sync_->gather_shard(full_state[k]));
      }
      sync_->load_shard_from_params();
      global_step_ = info.step;
      optimizer_->set_step_count(info.counters.at("optimizer_steps"));
      skipped_steps_ = info.counters.count("skipped_steps") ? info.counters.at("skipped_steps") : 0;
      char line[96];
      std::snprintf(line, sizeof(line), " (step %lld, verified and loaded in %.2f s)",
                    static_cast<long long>(global_step_), load_watch.seconds());
      log_.info("resume: " + dir + line);
      return true;
    } catch (const InputError& e) {
      if (!automatic) throw;
      if (grid_->rank() == 0)
        log_.warn("resume: " + dir + " is unusable (" + e.what() + "); trying an older one");
    }
  }
  // Starting over silently would overwrite the run: the user decides (ckpt.resume = none).
  throw InputError("resume: none of the " + std::to_string(candidates.size()) + " checkpoints in " +
                   config_.derived.checkpoint_dir +
                   " is usable (see the warnings above); set ckpt.resume = none to start over");
}

}  // namespace trellis
