// Node-local staging of the input (data.stage): before training, one rank per node copies
// the dataset files (a file, or every shard a glob names) into a node-local directory (the
// job's $TMPDIR or an NVMe mount), and every rank then reads from there instead of the shared
// file system. A copy already there is reused (a requeued job on the same node, or several
// runs of a sweep) only while its record says it is an intact copy of the source as the
// source is now (staged_copy.hpp): a stale or edited file in a shared /tmp is copied again.
#pragma once

#include <mpi.h>

#include <string>

namespace trellis {

// What staging did, summed over the job (the same on every rank): nodes = ranks that copied
// for their node (one per node), copied / reused = files copied anew / copies found current.
struct StagingReport {
  int nodes = 0, copied = 0, reused = 0;
};

// Collective over world. Returns the spec to open instead: <dir>/<file name> for a single
// file, <dir>/<the glob's last path component> for a glob (it matches exactly the staged
// shards). dir may start with $TMPDIR (${TMPDIR}), which is expanded (/tmp when unset).
// Failures on any rank (no space, unreadable source) throw on every rank, naming the file.
// `report`, if given, receives the counts above.
std::string stage_to_node_local(const std::string& spec, const std::string& dir, MPI_Comm world,
                                StagingReport* report = nullptr);

// "$TMPDIR/x" -> "<TMPDIR or /tmp>/x"; other paths unchanged.
std::string expand_tmpdir(const std::string& dir);

}  // namespace trellis
