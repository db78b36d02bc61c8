#include "trellis/train/files/run_directory.hpp"

#include "trellis/core/error.hpp"
#include "trellis/train/files/checkpoint_file.hpp"

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace trellis {

namespace fs = std::filesystem;

std::string EarlierRun::describe() const {
  std::vector<std::string> parts;
  for (const std::string& file : files) parts.push_back(fs::path(file).filename().string());
  if (!checkpoints.empty())
    parts.push_back(std::to_string(checkpoints.size()) +
                    (checkpoints.size() == 1 ? " checkpoint" : " checkpoints") + " (newest " +
                    fs::path(checkpoints.front()).filename().string() + ")");
  std::string text;
  for (std::size_t i = 0; i < parts.size(); ++i)
    text += (i == 0 ? "" : i + 1 == parts.size() ? " and " : ", ") + parts[i];
  return text;
}

bool EarlierRun::finished() const {
  for (const std::string& file : files)
    if (fs::path(file).filename() == "model.h5") return true;
  return false;
}

EarlierRun find_earlier_run(const std::string& run_dir, const std::string& checkpoint_dir) {
  EarlierRun run;
  for (const char* name : {"model.h5", "metrics.jsonl", "summary.json"}) {
    const fs::path path = fs::path(run_dir) / name;
    std::error_code ec;
    if (fs::exists(path, ec)) run.files.push_back(path.string());
  }
  run.checkpoints = list_checkpoints(checkpoint_dir);
  return run;
}

namespace {

void remove_path(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) throw Error("run.overwrite: cannot remove " + path + ": " + ec.message());
}

}  // namespace

void remove_earlier_run(const EarlierRun& run, const std::string& checkpoint_dir) {
  // `latest` first: a crash half-way leaves no hint pointing at a removed step.
  if (!run.checkpoints.empty()) remove_path((fs::path(checkpoint_dir) / "latest").string());
  for (const std::string& dir : run.checkpoints) remove_path(dir);
  for (const std::string& file : run.files) remove_path(file);
}

namespace {

// A fresh run over an earlier one: refused, or the earlier run deleted (run.overwrite; a dry
// run only says it would).
void refuse_or_clear_earlier_run(const TrainConfig& config, const Logger& log, bool dry_run) {
  const EarlierRun earlier = find_earlier_run(config.run_dir, config.derived.checkpoint_dir);
  if (earlier.empty()) return;
  // --resume auto with no checkpoint starts over: a stopped attempt that never checkpointed
  // left nothing to lose but its metrics; a finished run's model.h5 is refused below.
  const std::string& resume = config.ckpt.resume;
  if (resume != "none" && (resume != "auto" || !earlier.checkpoints.empty())) return;
  if (resume == "auto" && !earlier.finished()) return;
  if (!config.run_overwrite)
    throw ConfigError("run.dir " + config.run_dir + " holds an earlier run (" + earlier.describe() +
                      "), which this run would replace. Continue it with --resume auto, start "
                      "another beside it with --run.dir=<new directory>, or delete it and "
                      "start over with --run.overwrite=true");
  log.warn(std::string("run.overwrite: ") + (dry_run ? "would delete" : "deleting") +
           " the earlier run in " + config.run_dir + " (" + earlier.describe() + ")");
  if (!dry_run) remove_earlier_run(earlier, config.derived.checkpoint_dir);
}

// run.dir made, and written to once, before any data is read: a directory that cannot be is
// a configuration error (exit 2), not a failure minutes into the run.
void require_writable(const std::string& run_dir) {
  std::error_code ec;
  fs::create_directories(run_dir, ec);
  if (ec) throw ConfigError("run.dir " + run_dir + ": cannot create it (" + ec.message() + ")");
  const std::string probe = run_dir + "/.trellis-write-test";
  if (!std::ofstream(probe))
    throw ConfigError("run.dir " + run_dir + ": cannot write there (" +
                      std::error_code(errno, std::generic_category()).message() + ")");
  fs::remove(probe, ec);
}

}  // namespace

void prepare_run_directory(const TrainConfig& config, const Logger& log, bool dry_run) {
  refuse_or_clear_earlier_run(config, log, dry_run);
  if (!dry_run) require_writable(config.run_dir);
}

}  // namespace trellis
