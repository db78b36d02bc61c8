#include "trellis/comm/node_shared_window.hpp"

#include "trellis/comm/mpi_check.hpp"
#include "trellis/core/error.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>

namespace trellis {

namespace {
constexpr std::size_t kAlignBytes = 64;  // a cache line, and an AVX-512 vector
}

bool NodeSharedWindow::on_one_node(const MpiComm& comm) {
  MPI_Comm node = MPI_COMM_NULL;
  TRELLIS_MPI(MPI_Comm_split_type(comm.get(), MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  int node_size = 0;
  const int rc = MPI_Comm_size(node, &node_size);
  TRELLIS_MPI(MPI_Comm_free(&node));
  TRELLIS_MPI(rc);
  // Every rank sees the same answer: a split either keeps the whole group or breaks it.
  int all = node_size == comm.size() ? 1 : 0;
  TRELLIS_MPI(MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MIN, comm.get()));
  return all == 1;
}

NodeSharedWindow::NodeSharedWindow(const MpiComm& comm, std::size_t floats_per_rank)
    : comm_(comm.get()), rank_(comm.rank()), floats_per_rank_(floats_per_rank) {
  if (!on_one_node(comm))
    throw Error("NodeSharedWindow: the " + std::to_string(comm.size()) +
                " ranks of the communicator do not all run on one node");
  // Whole cache lines, so that every part starts aligned whatever MPI packs them into.
  const std::size_t bytes = std::max<std::size_t>(
      kAlignBytes, (floats_per_rank * sizeof(float) + kAlignBytes - 1) / kAlignBytes * kAlignBytes);
  MPI_Info info = MPI_INFO_NULL;
  TRELLIS_MPI(MPI_Info_create(&info));
  TRELLIS_MPI(MPI_Info_set(info, "alloc_shared_noncontig", "true"));
  void* base = nullptr;
  const int rc = MPI_Win_allocate_shared(static_cast<MPI_Aint>(bytes), sizeof(float), info, comm_,
                                         &base, &window_);
  MPI_Info_free(&info);
  TRELLIS_MPI(rc);
  TRELLIS_MPI(MPI_Win_set_errhandler(window_, MPI_ERRORS_RETURN));
  parts_.resize(static_cast<std::size_t>(comm.size()));
  for (int r = 0; r < comm.size(); ++r) {
    MPI_Aint size = 0;
    int unit = 0;
    void* part = nullptr;
    TRELLIS_MPI(MPI_Win_shared_query(window_, r, &size, &unit, &part));
    if (static_cast<std::size_t>(size) < bytes ||
        reinterpret_cast<std::uintptr_t>(part) % alignof(float) != 0)
      throw Error("NodeSharedWindow: rank " + std::to_string(r) + "'s part has " +
                  std::to_string(size) + " bytes, expected " + std::to_string(bytes));
    parts_[static_cast<std::size_t>(r)] = static_cast<float*>(part);
  }
  TRELLIS_MPI(MPI_Win_lock_all(MPI_MODE_NOCHECK, window_));
  std::memset(parts_[static_cast<std::size_t>(rank_)], 0, bytes);
  barrier();
}

NodeSharedWindow::~NodeSharedWindow() {
  if (window_ == MPI_WIN_NULL || std::uncaught_exceptions() > 0) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  MPI_Win_unlock_all(window_);
  MPI_Win_free(&window_);
}

void NodeSharedWindow::barrier() {
  TRELLIS_MPI(MPI_Win_sync(window_));
  TRELLIS_MPI(MPI_Barrier(comm_));
  TRELLIS_MPI(MPI_Win_sync(window_));
}

}  // namespace trellis
