#include "trellis/data/shard_paths.hpp"

#include "trellis/comm/agreement.hpp"
#include "trellis/comm/mpi_check.hpp"
#include "trellis/core/error.hpp"

#include <glob.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

namespace trellis {

namespace {

bool all_digits(const std::string& text) {
  return !text.empty() && std::all_of(text.begin(), text.end(),
                                      [](unsigned char c) { return std::isdigit(c) != 0; });
}

// Splits "<stem>-IIIII-of-KKKKK.h5" into its parts; false for any other name.
struct ShardName {
  std::string stem;
  int index = 0;
  int count = 0;
};
bool parse_shard_name(const std::string& path, ShardName& out) {
  const std::string tail = "-00000-of-00000.h5";
  if (path.size() <= tail.size()) return false;
  const std::size_t at = path.size() - tail.size();
  const std::string index = path.substr(at + 1, 5), count = path.substr(at + 10, 5);
  if (path[at] != '-' || path.compare(at + 6, 4, "-of-") != 0 ||
      path.compare(path.size() - 3, 3, ".h5") != 0 || !all_digits(index) || !all_digits(count)) {
    return false;
  }
  out = ShardName{path.substr(0, at), std::stoi(index), std::stoi(count)};
  return true;
}

void check_shard_sets(const std::string& spec, const std::vector<std::string>& files) {
  std::map<std::string, std::set<int>> counts, indices;  // per stem
  for (const std::string& file : files) {
    ShardName name;
    if (!parse_shard_name(file, name)) continue;
    counts[name.stem].insert(name.count);
    indices[name.stem].insert(name.index);
  }
  for (const auto& [stem, ks] : counts) {
    if (ks.size() > 1) {
      throw InputError("data path '" + spec + "': shards of '" + stem +
                       "' from different splits (-of-" + std::to_string(*ks.begin()) + " and -of-" +
                       std::to_string(*ks.rbegin()) + "); remove the stale files");
    }
    const int k = *ks.begin();
    for (int i = 0; i < k; ++i) {
      if (indices[stem].count(i) == 0) {
        throw InputError("data path '" + spec + "': shard " + shard_file_name(stem, i, k) +
                         " is missing (" + std::to_string(indices[stem].size()) + " of " +
                         std::to_string(k) + " shards found)");
      }
    }
    if (indices[stem].size() != static_cast<std::size_t>(k) || *indices[stem].rbegin() >= k) {
      throw InputError("data path '" + spec + "': shard numbers of '" + stem +
                       "' exceed the shard count " + std::to_string(k));
    }
  }
}

// Rank 0's half of resolve_data_files: the file list, or throws InputError.
std::vector<std::string> resolve_locally(const std::vector<std::string>& specs) {
  std::vector<std::string> files;
  for (const std::string& spec : specs) {
    for (std::string& file : expand_data_spec(spec)) files.push_back(std::move(file));
  }
  if (files.empty()) throw InputError("no data files given");
  for (const std::string& file : files) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(file, ec)) {
      throw InputError(file + ": no such file" +
                       (std::filesystem::exists(file, ec) ? " (not a regular file)" : ""));
    }
  }
  return files;
}

}  // namespace

std::string shard_file_name(const std::string& stem, int index, int count) {
  char suffix[48];
  std::snprintf(suffix, sizeof suffix, "-%05d-of-%05d.h5", index, count);
  return stem + suffix;
}

std::vector<std::string> expand_data_spec(const std::string& spec) {
  if (spec.find_first_of("*?[") == std::string::npos) return {spec};
  glob_t matches{};
  const int rc = glob(spec.c_str(), 0, nullptr, &matches);
  std::vector<std::string> files(matches.gl_pathv, matches.gl_pathv + matches.gl_pathc);
  globfree(&matches);
  if (rc == GLOB_NOMATCH || files.empty()) {
    throw InputError("data path '" + spec + "': no files match");
  }
  if (rc != 0) throw InputError("data path '" + spec + "': cannot expand the pattern");
  std::sort(files.begin(), files.end());  // byte order, independent of the locale
  check_shard_sets(spec, files);
  return files;
}

std::vector<std::string> resolve_data_files(const std::vector<std::string>& specs, MPI_Comm comm) {
  int rank = 0;
  TRELLIS_MPI(MPI_Comm_rank(comm, &rank));
  // Rank 0 resolves the paths (one glob, one directory listing), every rank learns whether
  // that failed (agree: the same InputError everywhere), then the NUL-separated list.
  std::string packed;
  PhaseFailure failure;
  if (rank == 0)
    capture(failure, PhaseFailure::kWhole, "", true, [&] {
      for (const std::string& file : resolve_locally(specs)) packed += file + '\0';
    });
  agree(comm, failure);
  long long length = static_cast<long long>(packed.size());
  TRELLIS_MPI(MPI_Bcast(&length, 1, MPI_LONG_LONG, 0, comm));
  packed.resize(static_cast<std::size_t>(length));
  TRELLIS_MPI(MPI_Bcast(packed.data(), static_cast<int>(length), MPI_CHAR, 0, comm));

  std::vector<std::string> files;
  for (std::size_t begin = 0; begin < packed.size();) {
    const std::size_t end = packed.find('\0', begin);
    files.push_back(packed.substr(begin, end - begin));
    begin = end + 1;
  }
  return files;
}

}  // namespace trellis
