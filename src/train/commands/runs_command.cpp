// `trellis runs` (command.hpp): the runs under a directory, one line each, from the files a run
// writes (summary.json, metrics.jsonl, checkpoints/): how it ended, its steps, its best
// evaluation, its time and cost. Rank 0 reads and prints; nothing is written.
#include "trellis/comm/mpi_check.hpp"
#include "trellis/core/format.hpp"
#include "trellis/train/commands/command.hpp"
#include "trellis/train/files/checkpoint_file.hpp"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace trellis {

namespace {

namespace fs = std::filesystem;

// The value of "key" in one line of Trellis' own flat JSON (JsonLine writes `"key": value`):
// a number, or a string without escapes. Enough for the files Trellis writes; not a parser.
std::optional<std::string> field(const std::string& line, const std::string& key) {
  const std::string needle = "\"" + key + "\": ";
  const std::size_t at = line.find(needle);
  if (at == std::string::npos) return std::nullopt;
  const std::size_t begin = at + needle.size();
  if (begin < line.size() && line[begin] == '"') {
    const std::size_t end = line.find('"', begin + 1);
    if (end == std::string::npos) return std::nullopt;
    return line.substr(begin + 1, end - begin - 1);
  }
  const std::size_t end = line.find_first_of(",}", begin);
  return line.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

std::optional<double> number(const std::string& line, const std::string& key) {
  const std::optional<std::string> text = field(line, key);
  if (!text) return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(text->c_str(), &end);
  if (end == text->c_str() || !std::isfinite(value)) return std::nullopt;
  return value;
}

struct RunRow {
  std::string name, status, steps = "-", best = "-", time = "-", cost = "-";
};

RunRow describe_run(const fs::path& dir) {
  RunRow row;
  row.name = dir.filename().string();
  std::ifstream summary_file(dir / "summary.json");
  std::stringstream summary;
  summary << summary_file.rdbuf();
  const std::string s = summary.str();
  double best_accuracy = -1, best_loss = INFINITY, last_step = -1;
  std::ifstream metrics(dir / "metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) {
    if (const auto step = number(line, "step"); step && number(line, "loss")) last_step = *step;
    if (const auto a = number(line, "test_accuracy")) best_accuracy = std::max(best_accuracy, *a);
    if (const auto l = number(line, "test_loss")) best_loss = std::min(best_loss, *l);
  }
  const std::vector<std::string> checkpoints = list_checkpoints((dir / "checkpoints").string());
  if (!s.empty()) {
    row.status = field(s, "finish").value_or("?");
    if (const auto steps = number(s, "steps")) row.steps = format_text("%.0f", *steps);
    if (const auto t = number(s, "wall_time_s")) row.time = format_text("%.1f s", *t);
    if (const auto c = number(s, "cost_on_demand"); c && *c > 0) row.cost = format_text("%.4g", *c);
  } else {
    row.status = checkpoints.empty() ? "no summary: running, or ended by a failure"
                                     : "no summary: running, or failed after a checkpoint";
    if (last_step >= 0) row.steps = format_text("%.0f", last_step);
  }
  // A language model logs test accuracy too (next-token); the loss is its usual figure.
  const bool tokens = number(s, "tokens_per_sec").value_or(0) > 0;
  if (best_loss < INFINITY && (tokens || best_accuracy < 0))
    row.best = format_text("test loss %.4f", best_loss);
  else if (best_accuracy >= 0)
    row.best = format_text("test accuracy %.4f", best_accuracy);
  return row;
}

bool is_run(const fs::path& dir) {
  std::error_code ec;
  for (const char* name : {"config.ini", "summary.json", "metrics.jsonl"})
    if (fs::exists(dir / name, ec)) return true;
  return false;
}

}  // namespace

int run_runs_command(const CommandContext& context, const CommandArgs& args) {
  int rank = 0;
  TRELLIS_MPI(MPI_Comm_rank(context.world, &rank));
  if (rank != 0) return 0;
  const fs::path root = args.text("--dir");
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    throw ConfigError("runs --dir " + root.string() + ": not a directory");
  std::vector<fs::path> dirs;
  if (is_run(root)) dirs.push_back(root);
  for (const fs::directory_entry& entry : fs::directory_iterator(root, ec))
    if (entry.is_directory() && is_run(entry.path())) dirs.push_back(entry.path());
  std::sort(dirs.begin(), dirs.end());
  if (dirs.empty()) {
    std::printf("no runs under %s\n", root.string().c_str());
    return 0;
  }
  std::printf("%-24s %-22s %8s  %-24s %10s %8s\n", "run", "status", "steps", "best", "time",
              "cost");
  for (const fs::path& dir : dirs) {
    const RunRow r = describe_run(dir);
    std::printf("%-24s %-22s %8s  %-24s %10s %8s\n", r.name.c_str(), r.status.c_str(),
                r.steps.c_str(), r.best.c_str(), r.time.c_str(), r.cost.c_str());
  }
  return 0;
}

}  // namespace trellis
