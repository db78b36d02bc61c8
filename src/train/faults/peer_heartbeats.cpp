#include "trellis/train/faults/peer_heartbeats.hpp"

#include "trellis/core/error.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <set>
#include <utility>
#include <vector>

namespace trellis {

namespace {

constexpr std::size_t kRecordBytes = 96;  // fixed: rewrites in place never leave a tail

// Seconds since the file's last modification, measured against the same file system: the
// age of a just-touched probe file is subtracted out, so only the file server's clock counts.
double seconds_since(const struct stat& st, double now_on_fs) {
  const double mtime =
      static_cast<double>(st.st_mtim.tv_sec) + 1e-9 * static_cast<double>(st.st_mtim.tv_nsec);
  return now_on_fs - mtime;
}

}  // namespace

std::string PeerHeartbeats::file_of(const std::string& dir, int rank) {
  return dir + "/rank-" + std::to_string(rank);
}

PeerHeartbeats::PeerHeartbeats(std::string dir, int rank, int world_size, const std::string& host)
    : dir_(std::move(dir)), rank_(rank), world_size_(world_size), host_(host) {
  const std::string path = file_of(dir_, rank_);
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  if (fd_ < 0)
    throw Error("cannot create the heartbeat file " + path + ": " + std::strerror(errno));
  write(0, "setup");
}

PeerHeartbeats::~PeerHeartbeats() {
  if (fd_ >= 0) ::close(fd_);
  ::unlink(file_of(dir_, rank_).c_str());
}

void PeerHeartbeats::write(std::int64_t step, const char* phase) {
  char record[kRecordBytes];
  std::memset(record, ' ', sizeof record);
  const int n = std::snprintf(record, sizeof record, "%d %.40s %lld %.16s", rank_, host_.c_str(),
                              static_cast<long long>(step), phase);
  if (n > 0 && static_cast<std::size_t>(n) < sizeof record) record[n] = ' ';
  record[sizeof record - 1] = '\n';
  [[maybe_unused]] const ssize_t written = ::pwrite(fd_, record, sizeof record, 0);
}

std::vector<PeerHeartbeats::Lost> PeerHeartbeats::lost_peers(double stale_s) const {
  // "Now" on the file system that holds the records: this rank's own file, rewritten just
  // before (the watchdog writes, then asks).
  std::vector<Lost> lost;
  struct stat own {};
  if (::stat(file_of(dir_, rank_).c_str(), &own) != 0) return lost;
  const double now_on_fs =
      static_cast<double>(own.st_mtim.tv_sec) + 1e-9 * static_cast<double>(own.st_mtim.tv_nsec);
  for (int r = 0; r < world_size_; ++r) {
    if (r == rank_) continue;
    const std::string path = file_of(dir_, r);
    struct stat st {};
    Lost peer;
    peer.rank = r;
    if (::stat(path.c_str(), &st) != 0) {
      lost.push_back(peer);  // no file: never started, or its node never reached the directory
      continue;
    }
    peer.age_s = seconds_since(st, now_on_fs);
    if (peer.age_s < stale_s) continue;
    char record[kRecordBytes + 1] = {};
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      [[maybe_unused]] const ssize_t got = ::pread(fd, record, kRecordBytes, 0);
      ::close(fd);
    }
    int rank = -1;
    long long step = -1;
    char host[64] = "?", phase[32] = "?";
    std::sscanf(record, "%d %63s %lld %31s", &rank, host, &step, phase);
    peer.has_record = true;
    peer.host = host;
    peer.step = step;
    peer.phase = phase;
    lost.push_back(peer);
  }
  return lost;
}

std::string PeerHeartbeats::describe_lost(double stale_s, int max_lines) const {
  const std::vector<Lost> lost = lost_peers(stale_s);
  std::string lines;
  int shown = 0;
  for (const Lost& peer : lost) {
    if (shown++ >= max_lines) break;
    char line[256];
    if (peer.has_record)
      std::snprintf(line, sizeof line,
                    "rank %d on %s: no heartbeat for %.0f s (last at step %lld, phase %s)",
                    peer.rank, peer.host.c_str(), peer.age_s, static_cast<long long>(peer.step),
                    peer.phase.c_str());
    else
      std::snprintf(line, sizeof line, "rank %d: no heartbeat file %s", peer.rank,
                    file_of(dir_, peer.rank).c_str());
    lines += (lines.empty() ? "" : "\n") + std::string(line);
  }
  if (static_cast<int>(lost.size()) > max_lines)
    lines += "\n... and " + std::to_string(lost.size() - static_cast<std::size_t>(max_lines)) +
             " more ranks without heartbeat";
  return lines;
}

bool PeerHeartbeats::record_lost(double stale_s) const {
  const std::vector<Lost> lost = lost_peers(stale_s);
  std::set<std::string> hosts;
  for (const Lost& peer : lost)
    if (peer.has_record) hosts.insert(peer.host);
  std::string text;
  for (const std::string& host : hosts) text += host + "\n";
  const std::string path = dir_ + "/lost-by-rank-" + std::to_string(rank_);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  if (fd >= 0) {
    [[maybe_unused]] const ssize_t written = ::write(fd, text.data(), text.size());
    ::close(fd);
  }
  return !lost.empty();
}

}  // namespace trellis
