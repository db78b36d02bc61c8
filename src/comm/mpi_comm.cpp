#include "trellis/comm/mpi_comm.hpp"

#include "trellis/comm/mpi_check.hpp"

#include <utility>

namespace trellis {

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<std::size_t>(length));
}

MpiComm::MpiComm(MPI_Comm comm, bool owned) : comm_(comm), owned_(owned) {
  if (comm_ == MPI_COMM_NULL) return;
  TRELLIS_MPI(MPI_Comm_rank(comm_, &rank_));
  TRELLIS_MPI(MPI_Comm_size(comm_, &size_));
}

MpiComm MpiComm::duplicate(MPI_Comm parent) {
  MPI_Comm dup = MPI_COMM_NULL;
  TRELLIS_MPI(MPI_Comm_dup(parent, &dup));
  TRELLIS_MPI(MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN));
  return MpiComm(dup, true);
}

MpiComm MpiComm::adopt(MPI_Comm comm) {
  if (comm != MPI_COMM_NULL) TRELLIS_MPI(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
  return MpiComm(comm, true);
}

MpiComm MpiComm::borrow(MPI_Comm comm) { return MpiComm(comm, false); }

MpiComm::MpiComm(MpiComm&& other) noexcept
    : comm_(std::exchange(other.comm_, MPI_COMM_NULL)),
      owned_(std::exchange(other.owned_, false)),
      rank_(other.rank_),
      size_(other.size_) {}

MpiComm& MpiComm::operator=(MpiComm&& other) noexcept {
  if (this != &other) {
    release();
    comm_ = std::exchange(other.comm_, MPI_COMM_NULL);
    owned_ = std::exchange(other.owned_, false);
    rank_ = other.rank_;
    size_ = other.size_;
  }
  return *this;
}

MpiComm::~MpiComm() { release(); }

void MpiComm::release() noexcept {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owned_ && comm_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm_);
  comm_ = MPI_COMM_NULL;
  owned_ = false;
}

}  // namespace trellis
