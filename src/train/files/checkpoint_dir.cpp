// The checkpoint directory: step names, listing (with warnings about `latest`), publishing a
// written step and pruning old ones.
#include "trellis/train/files/checkpoint_file.hpp"

#include "checkpoint_impl.hpp"
#include "trellis/core/durable_file.hpp"
#include "trellis/core/error.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <utility>

namespace trellis {

namespace {

namespace fs = std::filesystem;

// step-<7 or more digits> -> step; anything else -> -1.
std::int64_t parse_step_name(const std::string& name) {
  constexpr std::size_t kPrefix = 5;  // "step-"
  if (name.compare(0, kPrefix, "step-") != 0) return -1;
  const std::size_t digits = name.size() - std::min(name.size(), kPrefix);
  if (digits < 7 || digits > 18) return -1;
  for (std::size_t i = kPrefix; i < name.size(); ++i)
    if (name[i] < '0' || name[i] > '9') return -1;
  return std::stoll(name.substr(kPrefix));
}

// What `latest` says, and warnings when it is not a readable file naming a step directory.
void check_latest(const std::string& root, const std::vector<std::string>& steps,
                  std::vector<std::string>& warnings) {
  const std::string path = root + "/latest";
  std::error_code ec;
  const fs::file_status status = fs::symlink_status(path, ec);
  if (ec || !fs::exists(status)) return;  // none yet (or never written): nothing to say
  if (fs::is_directory(fs::status(path, ec))) {
    warnings.push_back(path + " is a directory, not a file naming a step (ignored)");
    return;
  }
  std::ifstream in(path);
  std::string latest;
  if (!in || !std::getline(in, latest)) {
    warnings.push_back(path + " is unreadable or empty (ignored)");
    return;
  }
  while (!latest.empty() && std::isspace(static_cast<unsigned char>(latest.back())))
    latest.pop_back();
  if (std::find(steps.begin(), steps.end(), latest) == steps.end()) {
    warnings.push_back(path + " names '" + latest +
                       "', which is not a step directory there (dangling; ignored)");
    return;
  }
  if (latest != steps.front())
    warnings.push_back(path + " names " + latest + ", but " + steps.front() +
                       " is newer: trying the newest first");
}

}  // namespace

std::string checkpoint_dir_name(std::int64_t step) {
  TRELLIS_REQUIRE(step >= 0, "checkpoint step must not be negative");
  char text[32];
  std::snprintf(text, sizeof text, "step-%07lld", static_cast<long long>(step));
  return text;
}

std::string strip_trailing_slashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

CheckpointListing scan_checkpoints(const std::string& root_path) {
  const std::string root = strip_trailing_slashes(root_path);
  CheckpointListing listing;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return listing;
  std::vector<std::pair<std::int64_t, std::string>> steps;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const std::int64_t step = parse_step_name(name);
    std::error_code type_ec;
    if (step >= 0 && it->is_directory(type_ec)) steps.emplace_back(step, name);
  }
  if (ec) throw Error("cannot list '" + root + "': " + ec.message());
  std::sort(steps.begin(), steps.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second > b.second;
  });
  std::vector<std::string> names;
  for (const auto& s : steps) names.push_back(s.second);
  if (!names.empty()) check_latest(root, names, listing.warnings);
  for (const std::string& name : names) listing.dirs.push_back(root + "/" + name);
  return listing;
}

std::vector<std::string> list_checkpoints(const std::string& root) {
  return scan_checkpoints(root).dirs;
}

void publish_checkpoint(const std::string& root, const std::string& name, int keep) {
  const std::string final_dir = root + "/" + name;
  const std::string tmp_dir = final_dir + ".tmp";
  fsync_file(tmp_dir + "/" + kCheckpointFileName);
  publish_by_rename(tmp_dir, final_dir);
  write_file_durably(root + "/latest.tmp", name + "\n");
  publish_by_rename(root + "/latest.tmp", root + "/latest");
  if (keep <= 0) return;
  const std::vector<std::string> all = list_checkpoints(root);
  bool removed = false;
  for (std::size_t i = static_cast<std::size_t>(keep); i < all.size(); ++i) {
    if (all[i] == final_dir) continue;
    remove_tree(all[i]);
    removed = true;
  }
  if (removed) fsync_directory(root);
}

}  // namespace trellis
