#include "trellis/train/loop/checkpoint_manager.hpp"

#include "trellis/comm/agreement.hpp"
#include "trellis/comm/mpi_check.hpp"
#include "trellis/core/error.hpp"
#include "trellis/core/timer.hpp"
#include "trellis/data/shard_paths.hpp"
#include "trellis/data/tokenizer_blob.hpp"
#include "trellis/train/files/int8_weights.hpp"
#include "trellis/train/files/weights_file.hpp"
#include "trellis/train/loop/initial_weights.hpp"
#include "trellis/train/loop/model_pieces.hpp"
#include "trellis/train/model/model_registry.hpp"
#include "trellis/train/monitoring/build_info.hpp"

#include <cstdio>

namespace trellis {

namespace {

// The keys a checkpoint must agree on (first_model_difference) decide the model's tensors and
// what a step means (the data order and the dropout masks are keyed by seed and step).
void check_compatible(const std::string& dir, const TrainConfig& stored,
                      const TrainConfig& current) {
  const ConfigDifference d = first_model_difference(stored, current);
  if (!d.key.empty())
    throw InputError(
        dir + ": checkpoint of another model or run: " + d.key + " = " + d.stored_value +
        " there, " + d.current_value +
        " here (start a new run.dir, or start over: ckpt.resume = none, run.overwrite = true)");
}

}  // namespace

CheckpointManager::CheckpointManager(const TrainConfig& config, const ProcessGrid& grid,
                                     TrainingModel& model, const FaultInjector& faults,
                                     Pruner& pruner, const Logger& log)
    : config_(config),
      grid_(grid),
      model_(model),
      faults_(faults),
      log_(log),
      powersgd_(config, grid, model.sync()),
      loss_scaler_(model.loss_scaler()),
      parts_{&powersgd_, &pruner, &loss_scaler_} {}

std::vector<TensorPiece> CheckpointManager::pieces(bool with_optimizer) const {
  return model_pieces(model_, grid_, with_optimizer);
}

std::string CheckpointManager::save(std::int64_t step, std::int64_t skipped_steps) {
  faults_.in_checkpoint(step);
  std::vector<TensorPiece> all = pieces(true);
  CheckpointInfo info;
  info.step = step;
  info.config_ini = config_.to_ini();
  info.build_info = build_summary();
  info.counters["global_batch"] = config_.train.global_batch;
  info.counters["optimizer_steps"] = model_.optimizer().step_count();
  info.counters["skipped_steps"] = skipped_steps;
  // The length the learning-rate schedule runs over (a resumed run may keep an earlier one).
  info.counters["schedule_steps"] = model_.schedule().spec().total_steps;
  for (CheckpointPart* part : parts_) part->save(all, info);
  return write_checkpoint(config_.derived.checkpoint_dir, all, info,
                          static_cast<int>(config_.ckpt.keep), grid_.world().get(), Hdf5Tuning{},
                          faults_.checkpoint_write_hook(step));
}

void CheckpointManager::load(const std::string& dir, const CheckpointInfo& info) {
  const MPI_Comm world = grid_.world().get();
  verify_checkpoint(dir, world);
  std::vector<TensorPiece> all = pieces(true);
  for (CheckpointPart* part : parts_) {
    const std::string warning = part->pieces_to_load(dir, info, all);
    if (!warning.empty() && grid_.rank() == 0) log_.warn(warning);
  }
  read_checkpoint(dir, all, world);
  for (CheckpointPart* part : parts_) part->loaded(info);
}

void CheckpointManager::fail_agreed(const std::string& message) const {
  log_.error(message);
  throw AgreedFailure(message, ExitCode::bad_input);
}

std::optional<ResumePoint> CheckpointManager::resume_if_asked() {
  const std::string& mode = config_.ckpt.resume;
  if (mode == "none") return std::nullopt;
  const bool automatic = mode == "auto";
  const CheckpointListing listing =
      automatic ? scan_checkpoints(config_.derived.checkpoint_dir) : CheckpointListing{{mode}, {}};
  if (grid_.rank() == 0)
    for (const std::string& warning : listing.warnings) log_.warn("resume: " + warning);
  const std::vector<std::string>& candidates = listing.dirs;
  if (candidates.empty()) {
    log_.info("resume: no checkpoint in " + config_.derived.checkpoint_dir +
              ", starting from step 0");
    return std::nullopt;
  }
  const MPI_Comm world = grid_.world().get();
  for (const std::string& dir : candidates) {
    // An unreadable file is a reason to fall back (auto); agreed over the world first.
    // A stored config that does not parse is damage too, not a configuration error.
    CheckpointInfo info;
    TrainConfig stored;
    std::string problem;
    try {
      info = read_checkpoint_info(dir);
      stored = TrainConfig::from(
          RawConfig::parse_text(info.config_ini, "the config stored in " + dir, {}));
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
      if (grid_.rank() == 0)
        log_.warn("resume: " + dir + " is unusable (" +
                  (problem.empty() ? "unreadable on another rank" : problem) +
                  "); trying an older one");
      continue;
    }
    // Another model's checkpoint is an error, never a fallback.
    run_agreed(world, log_, [&] { check_compatible(dir, stored, config_); });
    try {
      Stopwatch watch;
      load(dir, info);
      model_.optimizer().set_step_count(info.counters.at("optimizer_steps"));
      model_.parameters_loaded(info.step);
      ResumePoint point;
      point.dir = dir;
      point.step = info.step;
      point.skipped_steps =
          info.counters.count("skipped_steps") ? info.counters.at("skipped_steps") : 0;
      point.stored = stored;
      point.schedule_steps =
          info.counters.count("schedule_steps") ? info.counters.at("schedule_steps") : 0;
      char line[96];
      std::snprintf(line, sizeof(line), " (step %lld, verified and loaded in %.2f s)",
                    static_cast<long long>(point.step), watch.seconds());
      log_.info("resume: " + dir + line);
      return point;
    } catch (const InputError& e) {
      if (!automatic) fail_agreed(e.what());
      if (grid_.rank() == 0)
        log_.warn("resume: " + dir + " is unusable (" + e.what() + "); trying an older one");
    }
  }
  // Starting over silently would overwrite the run: the user decides (run.overwrite).
  fail_agreed("resume: none of the " + std::to_string(candidates.size()) + " checkpoints in " +
              config_.derived.checkpoint_dir +
              " is usable (see the warnings above); to start over set ckpt.resume = none and "
              "run.overwrite = true");
}

std::optional<ResumePoint> CheckpointManager::resume_or_start() {
  std::optional<ResumePoint> point = resume_if_asked();
  const std::string& path = config_.init.weights;
  if (path.empty()) return point;
  if (point) {
    log_.info("init.weights = " + path + " not read: the run resumed from " + point->dir);
    return point;
  }
  const MPI_Comm world = grid_.world().get();
  std::vector<std::string> notes;
  run_agreed(world, log_, [&] {
    if (is_int8_weights(path))
      throw ConfigError("init.weights = " + path +
                        " is an int8 model; training starts from fp32 weights (model.h5)");
    const TrainConfig stored = TrainConfig::from(
        RawConfig::parse_text(read_weights_config(path), "the config stored in " + path, {}));
    notes = check_initial_weights(stored, config_, path);
  });
  if (grid_.rank() == 0)
    for (const std::string& note : notes) log_.warn(note);
  Stopwatch watch;
  read_weights_pieces(path, pieces(false), world);
  model_.parameters_loaded(0);
  char line[96];
  std::snprintf(line, sizeof(line), " (read in %.2f s)", watch.seconds());
  log_.info("init.weights: parameters from " + path + line);
  return point;
}

std::string CheckpointManager::write_weights() const {
  // The same pieces and writers as a checkpoint's, without the optimizer state: every rank
  // writes what it owns, nobody gathers the model. A language model keeps the tokenizer of its
  // training data (BPE token files carry one), so generate needs no data to speak text.
  const std::string path = config_.run_dir + "/model.h5";
  std::string tokenizer;
  if (model_registration(config_.model.type).data == DataKind::tokens &&
      !config_.data.train.empty()) {
    const MPI_Comm world = grid_.world().get();
    const std::vector<std::string> files = resolve_data_files({config_.data.train}, world);
    tokenizer = read_tokenizer_json(files.front());
  }
  write_weights_file(path, pieces(false), config_.to_ini(), grid_.world().get(), Hdf5Tuning{},
                     tokenizer);
  return path;
}

}  // namespace trellis
