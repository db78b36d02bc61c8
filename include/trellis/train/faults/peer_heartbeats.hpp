// PeerHeartbeats: every rank's sign of life in <run.dir>/heartbeats/, so that a rank whose
// watchdog fires can name the peers that are gone instead of only saying that it is stuck.
//
// When a node dies (power, kernel panic, its network), the ranks on the other nodes wait in
// a collective that will never complete; MPI cannot tell them which peer is missing, and
// over TCP the survivors may not even see a connection error. So each rank's watchdog thread
// (alive while the main thread is stuck) rewrites a one-line record in its own file
// rank-<r>, every `period` seconds:  "<rank> <host> <step> <phase>". A file whose
// modification time is older than a few periods belongs to a rank that no longer runs (or a
// node that no longer reaches the shared file system). The run directory is on the file
// system every node shares (checkpoints need that already); a rank whose file is missing is
// named too. The modification time is set by the file system, so the nodes' clocks need not
// agree (NFS/Lustre: the server's clock; on one machine: the same clock).
//
// Cost: one 96-byte pwrite per rank per period (the period is fault.timeout_s / 4), only while
// the watchdog is on. Files are 0640 (group-readable for a shared project directory).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trellis {

class PeerHeartbeats {
 public:
  // Opens (creates) dir/rank-<rank>; the directory must exist. Error naming the file otherwise.
  PeerHeartbeats(std::string dir, int rank, int world_size, const std::string& host);
  ~PeerHeartbeats();  // closes and removes this rank's file: a finished rank is not lost
  PeerHeartbeats(const PeerHeartbeats&) = delete;
  PeerHeartbeats& operator=(const PeerHeartbeats&) = delete;

  // Rewrites this rank's record (and so its modification time). Best effort: a failed write
  // is not an error (the next one may succeed), it only makes this rank look stale.
  void write(std::int64_t step, const char* phase);

  // The other ranks whose record is older than stale_s seconds (or missing), one per line:
  // "rank 2 on tnode2: no heartbeat for 23 s (last at step 201, phase step)"; at most
  // max_lines lines and then a count. Empty when every peer looks alive.
  std::string describe_lost(double stale_s, int max_lines = 8) const;

  // Writes the hosts of the ranks describe_lost() names, one per line, sorted, into
  // dir/lost-by-rank-<rank> (0640), for job scripts (slurm/preemptible.sbatch). Returns
  // whether any rank was lost.
  bool record_lost(double stale_s) const;

  static std::string file_of(const std::string& dir, int rank);

 private:
  struct Lost {
    int rank = -1;
    bool has_record = false;  // false: no file at all
    std::string host;
    double age_s = 0;
    std::int64_t step = -1;
    std::string phase;
  };
  std::vector<Lost> lost_peers(double stale_s) const;

  std::string dir_;
  int rank_, world_size_;
  std::string host_;
  int fd_ = -1;
};

}  // namespace trellis
