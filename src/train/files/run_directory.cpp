#include "trellis/train/files/run_directory.hpp"

#include "trellis/core/error.hpp"
#include "trellis/train/files/checkpoint_file.hpp"

#include <filesystem>
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

}  // namespace trellis
