#include "trellis/data/staging.hpp"

#include "trellis/comm/agreement.hpp"
#include "trellis/comm/mpi_check.hpp"
#include "trellis/comm/mpi_comm.hpp"
#include "trellis/core/error.hpp"
#include "trellis/data/shard_paths.hpp"
#include "trellis/data/staged_copy.hpp"

#include <cstdlib>
#include <filesystem>
#include <vector>

namespace trellis {

namespace fs = std::filesystem;

std::string expand_tmpdir(const std::string& dir) {
  for (const std::string prefix : {"${TMPDIR}", "$TMPDIR"}) {
    if (dir.rfind(prefix, 0) != 0) continue;
    const char* tmp = std::getenv("TMPDIR");
    return std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + dir.substr(prefix.size());
  }
  return dir;
}

std::string stage_to_node_local(const std::string& spec, const std::string& dir, MPI_Comm world,
                                StagingReport* report) {
  const std::string target = expand_tmpdir(dir);
  const std::vector<std::string> files = resolve_data_files({spec}, world);
  MPI_Comm node_comm = MPI_COMM_NULL;
  TRELLIS_MPI(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node_comm));
  const MpiComm node = MpiComm::adopt(node_comm);
  // [nodes, copied, reused], summed over the world below
  int counts[3] = {node.rank() == 0 ? 1 : 0, 0, 0};
  PhaseFailure failure;
  if (node.rank() == 0)
    capture(failure, PhaseFailure::kWhole,
            "data.stage = " + dir + ": cannot stage " + spec + " into " + target + ": ", true, [&] {
              try {
                fs::create_directories(target);
                for (const std::string& file : files) {
                  const std::string to = (fs::path(target) / fs::path(file).filename()).string();
                  if (staged_copy_is_current(file, to)) {
                    ++counts[2];
                  } else {
                    copy_and_record(file, to);
                    ++counts[1];
                  }
                }
              } catch (const std::exception& e) {  // a file system error is bad input too
                throw InputError(e.what());
              }
            });
  // Everyone waits for the copies, and stops together if one node failed.
  agree(world, failure);
  TRELLIS_MPI(MPI_Allreduce(MPI_IN_PLACE, counts, 3, MPI_INT, MPI_SUM, world));
  if (report != nullptr) *report = StagingReport{counts[0], counts[1], counts[2]};
  return (fs::path(target) / fs::path(spec).filename()).string();
}

}  // namespace trellis
