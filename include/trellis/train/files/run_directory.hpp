// What an earlier run left in run.dir, looked for before a new run writes there, so that a run
// never silently replaces another: the caller refuses (exit 2, naming the ways out), resumes,
// or, with run.overwrite, deletes it first.
//
// An earlier run is any of: run.dir/model.h5, metrics.jsonl, summary.json, and checkpoint step
// directories under the checkpoint directory (train/files/checkpoint_file.hpp). config.ini
// alone (a run that ended before its first step) and TensorBoard event files (moved aside by
// the TensorBoard sink) do not count.
#pragma once

#include "trellis/core/log.hpp"
#include "trellis/train/config/train_config.hpp"

#include <string>
#include <vector>

namespace trellis {

struct EarlierRun {
  std::vector<std::string> files;        // paths of the run.dir files above that exist
  std::vector<std::string> checkpoints;  // step directories, newest first
  bool empty() const { return files.empty() && checkpoints.empty(); }
  bool finished() const;  // it wrote model.h5
  // "model.h5, metrics.jsonl and 3 checkpoints (newest step-0000400)"
  std::string describe() const;
};

// Local: reads the directories only. A missing run.dir or checkpoint directory is no run.
EarlierRun find_earlier_run(const std::string& run_dir, const std::string& checkpoint_dir);

// Deletes what find_earlier_run found, the checkpoint directory's `latest` with its step
// directories; Error naming the path that cannot be removed.
void remove_earlier_run(const EarlierRun& run, const std::string& checkpoint_dir);

// Before a fresh or resumed run writes in run.dir (rank 0 only): a fresh run over an earlier
// one is refused (ConfigError naming the ways out) unless run.overwrite, which deletes it; a
// resumed run continues it (--resume auto without a checkpoint starts over unless the earlier
// run finished). Then run.dir is made and written to once, so one that cannot be is exit 2
// before any data is read. A dry run checks and says what it would do, and changes nothing.
void prepare_run_directory(const TrainConfig& config, const Logger& log, bool dry_run);

}  // namespace trellis
