// data.stage (staging.hpp): the node's staged copy is reused only while it matches the source;
// a staged copy edited behind Trellis's back (same size) is copied again, on every rank alike.
#include "catch.hpp"
#include "unit/support/text_helpers.hpp"

#include "trellis/data/staging.hpp"

#include <mpi.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

using namespace trellis;
namespace fs = std::filesystem;

namespace {

using trellis::test::read_all;

}  // namespace

TEST_CASE("a staged file edited in place (same size) is staged again", "[data_mpi]") {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* root = std::getenv("TRELLIS_TEST_DATA");
  const fs::path dir = fs::path(root != nullptr && *root != '\0' ? root : "/tmp") /
                       ("staging_mpi_np" + std::to_string(size));
  const std::string source = (dir / "shared" / "train.h5").string();
  const std::string contents(50000, 's');
  if (rank == 0) {
    fs::remove_all(dir);
    fs::create_directories(dir / "shared");
    std::ofstream(source, std::ios::binary) << contents;
  }
  MPI_Barrier(MPI_COMM_WORLD);

  StagingReport report;
  const std::string staged =
      stage_to_node_local(source, (dir / "local").string(), MPI_COMM_WORLD, &report);
  CHECK(staged == (dir / "local" / "train.h5").string());
  CHECK(read_all(staged) == contents);
  // Every rank of this test shares one node: one copy, made by one rank.
  CHECK(report.nodes == 1);
  CHECK(report.copied == 1);
  CHECK(report.reused == 0);
  stage_to_node_local(source, (dir / "local").string(), MPI_COMM_WORLD, &report);
  CHECK(report.copied == 0);
  CHECK(report.reused == 1);

  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {  // a stale or edited copy in a shared /tmp: same size, other bytes
    std::fstream f(staged, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f << "STALE";
  }
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(stage_to_node_local(source, (dir / "local").string(), MPI_COMM_WORLD, &report) == staged);
  CHECK(read_all(staged) == contents);
  CHECK(report.copied == 1);  // the stale copy was replaced

  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) fs::remove_all(dir);
}
