#include "trellis/comm/counting_communicator.hpp"

#include "trellis/core/error.hpp"

namespace trellis {

const char* collective_kind_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::all_reduce:
      return "all_reduce";
    case CollectiveKind::reduce_scatter:
      return "reduce_scatter";
    case CollectiveKind::all_gather:
      return "all_gather";
    case CollectiveKind::broadcast:
      return "broadcast";
    case CollectiveKind::send:
      return "send";
    case CollectiveKind::recv:
      return "recv";
  }
  return "?";
}

CollectiveTally& CollectiveTally::operator+=(const CollectiveTally& o) {
  for (std::size_t k = 0; k < kCollectiveKinds; ++k) {
    by_kind[k].calls += o.by_kind[k].calls;
    by_kind[k].bytes += o.by_kind[k].bytes;
  }
  return *this;
}

CollectiveTally operator-(const CollectiveTally& after, const CollectiveTally& before) {
  CollectiveTally out;
  for (std::size_t k = 0; k < kCollectiveKinds; ++k) {
    out.by_kind[k].calls = after.by_kind[k].calls - before.by_kind[k].calls;
    out.by_kind[k].bytes = after.by_kind[k].bytes - before.by_kind[k].bytes;
  }
  return out;
}

bool CollectiveTally::empty() const {
  for (const CollectiveCount& c : by_kind)
    if (c.calls != 0) return false;
  return true;
}

CountingCommunicator::CountingCommunicator(std::unique_ptr<Communicator> backend)
    : inner_(std::move(backend)) {
  TRELLIS_REQUIRE(inner_ != nullptr, "CountingCommunicator: no backend");
}

namespace {
constexpr double kFloat = sizeof(float), kHalf = sizeof(std::uint16_t);
}

void CountingCommunicator::all_reduce(float* data, std::size_t count, ReduceOp op) {
  note(CollectiveKind::all_reduce, kFloat * count);
  inner_->all_reduce(data, count, op);
  sync_blocked();
}

CommRequest CountingCommunicator::start_all_reduce(float* data, std::size_t count, ReduceOp op) {
  note(CollectiveKind::all_reduce, kFloat * count);
  return inner_->start_all_reduce(data, count, op);
}

void CountingCommunicator::reduce_scatter(const float* send, float* recv, std::size_t recv_count,
                                          ReduceOp op) {
  note(CollectiveKind::reduce_scatter, kFloat * recv_count * size());
  inner_->reduce_scatter(send, recv, recv_count, op);
  sync_blocked();
}

CommRequest CountingCommunicator::start_reduce_scatter(const float* send, float* recv,
                                                       std::size_t recv_count, ReduceOp op) {
  note(CollectiveKind::reduce_scatter, kFloat * recv_count * size());
  return inner_->start_reduce_scatter(send, recv, recv_count, op);
}

void CountingCommunicator::all_gather(const float* send, float* recv, std::size_t send_count) {
  note(CollectiveKind::all_gather, kFloat * send_count * size());
  inner_->all_gather(send, recv, send_count);
  sync_blocked();
}

CommRequest CountingCommunicator::start_all_gather(const float* send, float* recv,
                                                   std::size_t send_count) {
  note(CollectiveKind::all_gather, kFloat * send_count * size());
  return inner_->start_all_gather(send, recv, send_count);
}

void CountingCommunicator::broadcast(float* data, std::size_t count, int root) {
  note(CollectiveKind::broadcast, kFloat * count);
  inner_->broadcast(data, count, root);
  sync_blocked();
}

CommRequest CountingCommunicator::start_all_reduce_half(std::uint16_t* data, std::size_t count,
                                                        Precision format) {
  note(CollectiveKind::all_reduce, kHalf * count);
  return inner_->start_all_reduce_half(data, count, format);
}

CommRequest CountingCommunicator::start_reduce_scatter_half(const std::uint16_t* send,
                                                            std::uint16_t* recv,
                                                            std::size_t recv_count,
                                                            Precision format) {
  note(CollectiveKind::reduce_scatter, kHalf * recv_count * size());
  return inner_->start_reduce_scatter_half(send, recv, recv_count, format);
}

void CountingCommunicator::send(const float* data, std::size_t count, int peer) {
  note(CollectiveKind::send, kFloat * count);
  inner_->send(data, count, peer);
  sync_blocked();
}

void CountingCommunicator::recv(float* data, std::size_t count, int peer) {
  note(CollectiveKind::recv, kFloat * count);
  inner_->recv(data, count, peer);
  sync_blocked();
}

void CountingCommunicator::group_start() { inner_->group_start(); }

void CountingCommunicator::group_end() {
  inner_->group_end();
  sync_blocked();
}

void CountingCommunicator::wait(CommRequest& request) {
  inner_->wait(request);
  sync_blocked();
}

bool CountingCommunicator::test(CommRequest& request) {
  const bool done = inner_->test(request);
  sync_blocked();
  return done;
}

}  // namespace trellis
