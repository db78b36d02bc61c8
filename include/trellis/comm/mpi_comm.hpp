// MpiComm: an owned (or borrowed) MPI communicator. Owned ones are freed in the destructor,
// so sub-communicators of the process grid never leak and are never freed twice.
#pragma once

#include <mpi.h>

namespace trellis {

class MpiComm {
 public:
  MpiComm() = default;
  // Duplicates `parent` so library traffic never matches user or other-library messages.
  static MpiComm duplicate(MPI_Comm parent);
  // Takes ownership of a communicator created by MPI_Comm_split and friends.
  static MpiComm adopt(MPI_Comm comm);
  // Refers to a communicator owned elsewhere (MPI_COMM_WORLD, MPI_COMM_SELF).
  static MpiComm borrow(MPI_Comm comm);

  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;
  MpiComm(MpiComm&& other) noexcept;
  MpiComm& operator=(MpiComm&& other) noexcept;
  ~MpiComm();

  MPI_Comm get() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  MpiComm(MPI_Comm comm, bool owned);
  void release() noexcept;

  MPI_Comm comm_ = MPI_COMM_NULL;
  bool owned_ = false;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace trellis
