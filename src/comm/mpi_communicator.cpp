#include "trellis/comm/mpi_communicator.hpp"

#include "trellis/comm/mpi_check.hpp"
#include "trellis/core/error.hpp"
#include "trellis/core/host_simd.hpp"
#include "trellis/core/kokkos_types.hpp"
#include "trellis/core/timer.hpp"

#include <algorithm>
#include <climits>

namespace trellis {

namespace {

// Point-to-point messages of the pipeline; collectives do not use tags.
constexpr int kP2pTag = 7301;

int checked_count(std::size_t count) {
  TRELLIS_REQUIRE(count <= static_cast<std::size_t>(INT_MAX),
                  "message of " + std::to_string(count) + " floats exceeds INT_MAX elements");
  return static_cast<int>(count);
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return MPI_SUM;
    case ReduceOp::max:
      return MPI_MAX;
    case ReduceOp::min:
      return MPI_MIN;
  }
  return MPI_SUM;
}

// Kernels run asynchronously on device backends: finish them before MPI touches a buffer.
void fence_producers() { Kokkos::fence(); }

// Adds the lifetime of the scope to a communicator's blocked time.
class BlockedScope {
 public:
  explicit BlockedScope(double& total) : total_(total) {}
  ~BlockedScope() { total_ += watch_.seconds(); }
  BlockedScope(const BlockedScope&) = delete;
  BlockedScope& operator=(const BlockedScope&) = delete;

 private:
  double& total_;
  Stopwatch watch_;
};

CommRequest pending(MPI_Request request) {
  CommRequest r;
  r.mpi = request;
  r.pending = true;
  return r;
}

// MPI user functions: inout[i] = round(in[i] + inout[i]) with the sum formed in fp32.
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = float_to_bf16_bits(bf16_bits_to_float(a[i]) + bf16_bits_to_float(b[i]));
}
void fp16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = float_to_fp16_bits(fp16_bits_to_float(a[i]) + fp16_bits_to_float(b[i]));
}

}  // namespace

MpiCommunicator::MpiCommunicator(const MpiComm& comm) : comm_(comm) {
  group_requests_.reserve(kMaxGroupOps);
  TRELLIS_MPI(MPI_Op_create(&bf16_sum, /*commute=*/1, &bf16_sum_));
  TRELLIS_MPI(MPI_Op_create(&fp16_sum, /*commute=*/1, &fp16_sum_));
}

MpiCommunicator::~MpiCommunicator() {
  // Not checked: a destructor must not throw, and MPI may already be finalizing after an error.
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (bf16_sum_ != MPI_OP_NULL) MPI_Op_free(&bf16_sum_);
  if (fp16_sum_ != MPI_OP_NULL) MPI_Op_free(&fp16_sum_);
}

MPI_Op MpiCommunicator::half_sum(Precision format) const {
  TRELLIS_REQUIRE(format != Precision::fp32, "16-bit collective asked for fp32");
  TRELLIS_REQUIRE(kHostMemory,
                  "parallel.grad_dtype = bf16/fp16 over MPI needs host buffers (MPI reduces "
                  "16-bit words in host code); use parallel.backend = nccl on GPUs");
  return format == Precision::bf16 ? bf16_sum_ : fp16_sum_;
}

CommRequest MpiCommunicator::start_all_reduce_half(std::uint16_t* data, std::size_t count,
                                                   Precision format) {
  const MPI_Op op = half_sum(format);
  if (size() == 1 || count == 0) return {};
  fence_producers();
  MPI_Request request = MPI_REQUEST_NULL;
  TRELLIS_MPI(MPI_Iallreduce(MPI_IN_PLACE, data, checked_count(count), MPI_UINT16_T, op,
                             comm_.get(), &request));
  return pending(request);
}

CommRequest MpiCommunicator::start_reduce_scatter_half(const std::uint16_t* send,
                                                       std::uint16_t* recv,
                                                       std::size_t recv_count, Precision format) {
  const MPI_Op op = half_sum(format);
  if (recv_count == 0) return {};
  fence_producers();
  if (size() == 1) {
    std::copy(send, send + recv_count, recv);
    return {};
  }
  MPI_Request request = MPI_REQUEST_NULL;
  TRELLIS_MPI(MPI_Ireduce_scatter_block(send, recv, checked_count(recv_count), MPI_UINT16_T, op,
                                        comm_.get(), &request));
  return pending(request);
}

void MpiCommunicator::all_reduce(float* data, std::size_t count, ReduceOp op) {
  if (size() == 1 || count == 0) return;
  const BlockedScope blocked(blocked_seconds_);
  fence_producers();
  TRELLIS_MPI(
      MPI_Allreduce(MPI_IN_PLACE, data, checked_count(count), MPI_FLOAT, mpi_op(op), comm_.get()));
}

CommRequest MpiCommunicator::start_all_reduce(float* data, std::size_t count, ReduceOp op) {
  if (size() == 1 || count == 0) return {};
  fence_producers();
  MPI_Request request = MPI_REQUEST_NULL;
  TRELLIS_MPI(MPI_Iallreduce(MPI_IN_PLACE, data, checked_count(count), MPI_FLOAT, mpi_op(op),
                             comm_.get(), &request));
  return pending(request);
}

void MpiCommunicator::reduce_scatter(const float* send, float* recv, std::size_t recv_count,
                                     ReduceOp op) {
  CommRequest request = start_reduce_scatter(send, recv, recv_count, op);
  wait(request);
}

CommRequest MpiCommunicator::start_reduce_scatter(const float* send, float* recv,
                                                  std::size_t recv_count, ReduceOp op) {
  if (recv_count == 0) return {};
  fence_producers();
  if (size() == 1) {
    using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
    Kokkos::deep_copy(Kokkos::View<float*, MemSpace, Unmanaged>(recv, recv_count),
                      Kokkos::View<const float*, MemSpace, Unmanaged>(send, recv_count));
    return {};
  }
  MPI_Request request = MPI_REQUEST_NULL;
  TRELLIS_MPI(MPI_Ireduce_scatter_block(send, recv, checked_count(recv_count), MPI_FLOAT,
                                        mpi_op(op), comm_.get(), &request));
  return pending(request);
}

void MpiCommunicator::all_gather(const float* send, float* recv, std::size_t send_count) {
  CommRequest request = start_all_gather(send, recv, send_count);
  wait(request);
}

CommRequest MpiCommunicator::start_all_gather(const float* send, float* recv,
                                              std::size_t send_count) {
  if (send_count == 0) return {};
  fence_producers();
  const bool in_place = send == recv + static_cast<std::size_t>(rank()) * send_count;
  MPI_Request request = MPI_REQUEST_NULL;
  TRELLIS_MPI(MPI_Iallgather(in_place ? MPI_IN_PLACE : send, checked_count(send_count), MPI_FLOAT,
                             recv, checked_count(send_count), MPI_FLOAT, comm_.get(), &request));
  return pending(request);
}

void MpiCommunicator::broadcast(float* data, std::size_t count, int root) {
  if (size() == 1 || count == 0) return;
  const BlockedScope blocked(blocked_seconds_);
  fence_producers();
  TRELLIS_MPI(MPI_Bcast(data, checked_count(count), MPI_FLOAT, root, comm_.get()));
}

void MpiCommunicator::send(const float* data, std::size_t count, int peer) {
  const BlockedScope blocked(blocked_seconds_);
  fence_producers();
  if (!in_group_) {
    TRELLIS_MPI(MPI_Send(data, checked_count(count), MPI_FLOAT, peer, kP2pTag, comm_.get()));
    return;
  }
  TRELLIS_REQUIRE(group_requests_.size() < kMaxGroupOps, "too many send/recv in one group");
  group_requests_.push_back(MPI_REQUEST_NULL);
  TRELLIS_MPI(MPI_Isend(data, checked_count(count), MPI_FLOAT, peer, kP2pTag, comm_.get(),
                        &group_requests_.back()));
}

void MpiCommunicator::recv(float* data, std::size_t count, int peer) {
  const BlockedScope blocked(blocked_seconds_);
  fence_producers();  // kernels still reading the buffer must finish before it is overwritten
  if (!in_group_) {
    TRELLIS_MPI(MPI_Recv(data, checked_count(count), MPI_FLOAT, peer, kP2pTag, comm_.get(),
                         MPI_STATUS_IGNORE));
    return;
  }
  TRELLIS_REQUIRE(group_requests_.size() < kMaxGroupOps, "too many send/recv in one group");
  group_requests_.push_back(MPI_REQUEST_NULL);
  TRELLIS_MPI(MPI_Irecv(data, checked_count(count), MPI_FLOAT, peer, kP2pTag, comm_.get(),
                        &group_requests_.back()));
}

void MpiCommunicator::group_start() {
  TRELLIS_REQUIRE(!in_group_, "group_start() inside a group");
  in_group_ = true;
}

void MpiCommunicator::group_end() {
  TRELLIS_REQUIRE(in_group_, "group_end() without group_start()");
  in_group_ = false;
  const BlockedScope blocked(blocked_seconds_);
  const int count = static_cast<int>(group_requests_.size());
  if (count > 0) TRELLIS_MPI(MPI_Waitall(count, group_requests_.data(), MPI_STATUSES_IGNORE));
  group_requests_.clear();  // keeps the capacity: no allocation in the next group
}

void MpiCommunicator::wait(CommRequest& request) {
  if (!request.pending) return;
  const BlockedScope blocked(blocked_seconds_);
  TRELLIS_MPI(MPI_Wait(&request.mpi, MPI_STATUS_IGNORE));
  request.pending = false;
}

bool MpiCommunicator::test(CommRequest& request) {
  if (!request.pending) return true;
  int done = 0;
  TRELLIS_MPI(MPI_Test(&request.mpi, &done, MPI_STATUS_IGNORE));
  if (done) request.pending = false;
  return done != 0;
}

}  // namespace trellis
