// NCCL backend of Communicator (TRELLIS_ENABLE_NCCL): see nccl_communicator.hpp for the stream
// and event ordering contract. Compiles to nothing in builds without NCCL.
#include "trellis/comm/nccl_communicator.hpp"

#if defined(TRELLIS_ENABLE_NCCL)

#include "trellis/comm/mpi_check.hpp"
#include "trellis/comm/mpi_comm.hpp"
#include "trellis/comm/nccl_check.hpp"
#include "trellis/core/error.hpp"
#include "trellis/core/kokkos_types.hpp"

#include <cstdint>
#include <string>
#include <type_traits>

namespace trellis {

namespace {

static_assert(std::is_same_v<ExecSpace, Kokkos::Cuda>,
              "the NCCL backend needs Kokkos' default execution space to be Cuda");

// The stream Kokkos launches the model's kernels on.
cudaStream_t compute_stream() { return ExecSpace().cuda_stream(); }

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return ncclSum;
    case ReduceOp::max:
      return ncclMax;
    case ReduceOp::min:
      return ncclMin;
  }
  return ncclSum;
}

// Whether [a, a + a_count) and [b, b + b_count) share an element.
bool overlaps(const float* a, std::size_t a_count, const float* b, std::size_t b_count) {
  const auto a0 = reinterpret_cast<std::uintptr_t>(a);
  const auto b0 = reinterpret_cast<std::uintptr_t>(b);
  return a0 < b0 + b_count * sizeof(float) && b0 < a0 + a_count * sizeof(float);
}

}  // namespace

// ---- owners ----------------------------------------------------------------------------------

NcclCommunicator::Stream::Stream() {
  TRELLIS_CUDA(cudaStreamCreateWithFlags(&get, cudaStreamNonBlocking));
}
NcclCommunicator::Stream::~Stream() { cudaStreamDestroy(get); }

NcclCommunicator::Event::Event() {
  TRELLIS_CUDA(cudaEventCreateWithFlags(&get, cudaEventDisableTiming));
}
NcclCommunicator::Event::~Event() { cudaEventDestroy(get); }

NcclCommunicator::Comm::Comm(const MpiComm& comm) {
  // Rank 0 makes the id and broadcasts it with its status, so a failure there throws on every
  // rank instead of leaving the others waiting in ncclCommInitRank.
  struct Bootstrap {
    ncclUniqueId id;
    ncclResult_t rc;
  } boot{};
  boot.rc = ncclSuccess;
  if (comm.rank() == 0) boot.rc = ncclGetUniqueId(&boot.id);
  TRELLIS_MPI(MPI_Bcast(&boot, static_cast<int>(sizeof(boot)), MPI_BYTE, 0, comm.get()));
  check_call(boot.rc == ncclSuccess, "NCCL", "ncclGetUniqueId(&id) on rank 0",
             ncclGetErrorString(boot.rc), __FILE__, __LINE__);
  TRELLIS_NCCL(ncclCommInitRank(&get, comm.size(), boot.id, comm.rank()));
}
NcclCommunicator::Comm::~Comm() { ncclCommDestroy(get); }

// ---- communicator ----------------------------------------------------------------------------

NcclCommunicator::NcclCommunicator(const MpiComm& comm)
    : rank_(comm.rank()), size_(comm.size()), nccl_(comm) {}

NcclCommunicator::~NcclCommunicator() {
  // Let queued communication finish before its communicator and stream go away (unchecked:
  // destructors must not throw).
  cudaStreamSynchronize(stream_.get);
}

cudaStream_t NcclCommunicator::after_compute() {
  TRELLIS_CUDA(cudaEventRecord(ready_.get, compute_stream()));
  TRELLIS_CUDA(cudaStreamWaitEvent(stream_.get, ready_.get, 0));
  return stream_.get;
}

void NcclCommunicator::compute_after() {
  TRELLIS_CUDA(cudaEventRecord(done_.get, stream_.get));
  TRELLIS_CUDA(cudaStreamWaitEvent(compute_stream(), done_.get, 0));
}

CommRequest NcclCommunicator::record_request() {
  for (int i = 0; i < kEventSlots; ++i) {
    const int slot = (next_slot_ + i) % kEventSlots;
    if (busy_[slot]) continue;
    TRELLIS_CUDA(cudaEventRecord(events_[slot].get, stream_.get));
    busy_[slot] = true;
    next_slot_ = (slot + 1) % kEventSlots;
    CommRequest request;
    request.event = slot;
    request.pending = true;
    return request;
  }
  // Every slot belongs to a pending request: order on the Kokkos stream instead, so the work
  // is still complete for later kernels, then report the misuse.
  compute_after();
  throw Error("NCCL communicator: more than " + std::to_string(kEventSlots) +
              " outstanding requests (complete each start_* request with wait())");
}

void NcclCommunicator::release(CommRequest& request) {
  busy_[request.event] = false;
  request.pending = false;
  request.event = -1;
}

void NcclCommunicator::require_no_group(const char* call) const {
  TRELLIS_REQUIRE(!in_group_, std::string(call) + " inside a send/recv group");
}

void NcclCommunicator::all_reduce(float* data, std::size_t count, ReduceOp op) {
  if (launch_all_reduce(data, count, op)) compute_after();
}

CommRequest NcclCommunicator::start_all_reduce(float* data, std::size_t count, ReduceOp op) {
  return launch_all_reduce(data, count, op) ? record_request() : CommRequest{};
}

bool NcclCommunicator::launch_all_reduce(float* data, std::size_t count, ReduceOp op) {
  require_no_group("all_reduce");
  if (size() == 1 || count == 0) return false;
  cudaStream_t stream = after_compute();
  TRELLIS_NCCL(ncclAllReduce(data, data, count, ncclFloat, nccl_op(op), nccl_.get, stream));
  return true;
}

void NcclCommunicator::reduce_scatter(const float* send, float* recv, std::size_t recv_count,
                                      ReduceOp op) {
  if (launch_reduce_scatter(send, recv, recv_count, op)) compute_after();
}

CommRequest NcclCommunicator::start_reduce_scatter(const float* send, float* recv,
                                                   std::size_t recv_count, ReduceOp op) {
  return launch_reduce_scatter(send, recv, recv_count, op) ? record_request() : CommRequest{};
}

bool NcclCommunicator::launch_reduce_scatter(const float* send, float* recv, std::size_t recv_count,
                                             ReduceOp op) {
  require_no_group("reduce_scatter");
  if (recv_count == 0) return false;
  const std::size_t send_count = static_cast<std::size_t>(size()) * recv_count;
  TRELLIS_REQUIRE(!overlaps(send, send_count, recv, recv_count),
                  "reduce_scatter: recv overlaps send");
  cudaStream_t stream = after_compute();
  if (size() == 1) {
    TRELLIS_CUDA(
        cudaMemcpyAsync(recv, send, recv_count * sizeof(float), cudaMemcpyDeviceToDevice, stream));
  } else {
    TRELLIS_NCCL(
        ncclReduceScatter(send, recv, recv_count, ncclFloat, nccl_op(op), nccl_.get, stream));
  }
  return true;
}

void NcclCommunicator::all_gather(const float* send, float* recv, std::size_t send_count) {
  if (launch_all_gather(send, recv, send_count)) compute_after();
}

CommRequest NcclCommunicator::start_all_gather(const float* send, float* recv,
                                               std::size_t send_count) {
  return launch_all_gather(send, recv, send_count) ? record_request() : CommRequest{};
}

bool NcclCommunicator::launch_all_gather(const float* send, float* recv, std::size_t send_count) {
  require_no_group("all_gather");
  if (send_count == 0) return false;
  // NCCL works in place by itself when send == recv + rank() * send_count; a single rank still
  // copies send into recv.
  cudaStream_t stream = after_compute();
  TRELLIS_NCCL(ncclAllGather(send, recv, send_count, ncclFloat, nccl_.get, stream));
  return true;
}

namespace {
ncclDataType_t nccl_half(Precision format) {
  TRELLIS_REQUIRE(format != Precision::fp32, "16-bit collective asked for fp32");
  return format == Precision::bf16 ? ncclBfloat16 : ncclFloat16;
}
}  // namespace

CommRequest NcclCommunicator::start_all_reduce_half(std::uint16_t* data, std::size_t count,
                                                    Precision format) {
  require_no_group("all_reduce_half");
  const ncclDataType_t type = nccl_half(format);
  if (size() == 1 || count == 0) return {};
  cudaStream_t stream = after_compute();
  TRELLIS_NCCL(ncclAllReduce(data, data, count, type, ncclSum, nccl_.get, stream));
  return record_request();
}

CommRequest NcclCommunicator::start_reduce_scatter_half(const std::uint16_t* send,
                                                        std::uint16_t* recv,
                                                        std::size_t recv_count, Precision format) {
  require_no_group("reduce_scatter_half");
  const ncclDataType_t type = nccl_half(format);
  if (recv_count == 0) return {};
  cudaStream_t stream = after_compute();
  if (size() == 1) {
    TRELLIS_CUDA(cudaMemcpyAsync(recv, send, recv_count * sizeof(std::uint16_t),
                                 cudaMemcpyDeviceToDevice, stream));
  } else {
    TRELLIS_NCCL(ncclReduceScatter(send, recv, recv_count, type, ncclSum, nccl_.get, stream));
  }
  return record_request();
}

void NcclCommunicator::broadcast(float* data, std::size_t count, int root) {
  require_no_group("broadcast");
  if (size() == 1 || count == 0) return;
  cudaStream_t stream = after_compute();
  TRELLIS_NCCL(ncclBroadcast(data, data, count, ncclFloat, root, nccl_.get, stream));
  compute_after();
}

// Outside a group a lone ncclSend/ncclRecv is a valid NCCL call: it holds up the streams, not
// the host. Inside one it is launched by ncclGroupEnd; the ready-event wait enqueued here
// precedes it on the communication stream all the same.
void NcclCommunicator::send(const float* data, std::size_t count, int peer) {
  cudaStream_t stream = after_compute();
  TRELLIS_NCCL(ncclSend(data, count, ncclFloat, peer, nccl_.get, stream));
  if (!in_group_) compute_after();
}

void NcclCommunicator::recv(float* data, std::size_t count, int peer) {
  cudaStream_t stream = after_compute();
  TRELLIS_NCCL(ncclRecv(data, count, ncclFloat, peer, nccl_.get, stream));
  if (!in_group_) compute_after();
}

void NcclCommunicator::group_start() {
  TRELLIS_REQUIRE(!in_group_, "group_start() inside a group");
  TRELLIS_NCCL(ncclGroupStart());
  in_group_ = true;
}

void NcclCommunicator::group_end() {
  TRELLIS_REQUIRE(in_group_, "group_end() without group_start()");
  in_group_ = false;
  TRELLIS_NCCL(ncclGroupEnd());
  compute_after();
}

void NcclCommunicator::wait(CommRequest& request) {
  if (!request.pending) return;
  TRELLIS_REQUIRE(request.event >= 0 && request.event < kEventSlots && busy_[request.event],
                  "wait() on a request this communicator did not start");
  TRELLIS_CUDA(cudaStreamWaitEvent(compute_stream(), events_[request.event].get, 0));
  release(request);
}

bool NcclCommunicator::test(CommRequest& request) {
  if (!request.pending) return true;
  TRELLIS_REQUIRE(request.event >= 0 && request.event < kEventSlots && busy_[request.event],
                  "test() on a request this communicator did not start");
  const cudaError_t rc = cudaEventQuery(events_[request.event].get);
  if (rc == cudaSuccess) {
    // Already complete on the device: later kernels need no extra ordering.
    release(request);
    return true;
  }
  check_call(rc == cudaErrorNotReady, "CUDA", "cudaEventQuery(request event)",
             cudaGetErrorString(rc), __FILE__, __LINE__);
  // Not done yet: surface a failure of the communicator instead of letting callers poll forever.
  ncclResult_t async_rc = ncclSuccess;
  TRELLIS_NCCL(ncclCommGetAsyncError(nccl_.get, &async_rc));
  check_call(async_rc == ncclSuccess, "NCCL", "ncclCommGetAsyncError(comm, &async_rc)",
             ncclGetErrorString(async_rc), __FILE__, __LINE__);
  return false;
}

}  // namespace trellis

#endif  // TRELLIS_ENABLE_NCCL
