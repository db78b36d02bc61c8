// GradientSync: data-parallel gradient reduction over contiguous buckets of the flat gradient
// buffer, launched while the last micro-batch's backward is still running, and optionally
// ZeRO-1 (each dp rank keeps the optimizer's view of only its shard of the parameters).
//
// Buckets: [b0, b1) ranges of the flat buffer of at most bucket_bytes / 4 floats, their length
// a multiple of padding_multiple(dp) = dp * ParameterStore::kAlignment (the buffer is padded to
// that multiple, so the last, shorter bucket is one too). Backward runs in reverse registration
// order, so buckets become final from the highest offset down; models report this through
// ParameterStore::grads_final_from(offset), which reaches grads_final_from() below.
//
//   flat grads  |------ bucket 0 ------|------ bucket 1 ------|-- bucket 2 --|
//   dp = 2      |  piece 0  |  piece 1 |  piece 0  |  piece 1 | p 0  |  p 1  |
//
//   not sharded: each bucket all-reduced (sum) in place in store.grads().
//   zero1:       rank r owns piece r of EVERY bucket; its pieces sit back to back in the
//                update space [update_size = buffer_size / dp] (gradients, optimizer state):
//
//   rank 1's shard  | b0 piece 1 | b1 piece 1 | b2 p 1 |
//                   s_0          s_1          s_2        (s_b = sum of previous len / dp)
//
//                reduce-scatter grads[b0, b1) -> shard_grads[s_b, s_b + len / dp) (sum), the
//                optimizer updates this rank's pieces of store.params() in place (one window
//                per bucket, update_windows(): no packed copy of the parameters), and
//                finish_update() all-gathers them in place into store.params()[b0, b1).
//
// ZeRO-2 / ZeRO-3 (options.zero >= 2; communicator exchange, no PowerSGD): the
// buckets follow the store's units (zero_layout.hpp): one bucket per unit, the outer ranges cut
// into buckets as above. The units' gradients (ZeRO-3: and parameters) live in two slots of
// the physical buffers; UnitExchange reduce-scatters each unit's gradients into the shard
// after its backward, every micro-batch, and (ZeRO-3) gathers its parameters before use.
// finish_reduction() reduce-scatters the outer buckets (whole in the physical gradients, they
// accumulate over the micro-batches). ZeRO-3 keeps the parameters' shard in a buffer of its own
// [update_size] (the update windows); finish_update() all-gathers only the outer buckets into
// the physical parameters and marks every slot stale. ZeRO-2 updates and gathers the
// parameters in place as ZeRO-1 does.
//
// Calling sequence per training step:
//   store.zero_grads();
//   for each micro-batch k:
//     sync.begin_backward(k == last);  // arms the overlap for the last micro-batch only
//     forward; backward;               // models call store.grads_final_from(offset)
//   sync.finish_reduction();           // update_grads() = SUM over dp (callers pre-scale)
//   clip over update_grads()           // sharded: all-reduce the sum of squares over dp first
//   optimizer.step(sync.update_windows(), sync.update_grads(), lr, 1);  // built: update_size()
//   sync.finish_update();              // zero1: store.params() := the gathered pieces
//
// Node shared memory (options.shared, host builds, every dp rank on one node): the gradients
// (and with zero1 the parameters) live in a NodeSharedWindow, and finish_reduction() sums them
// in place instead of through the communicator. There is one bucket, so rank r's piece is the
// contiguous slice [r * n / dp, (r + 1) * n / dp). After a barrier, rank r sums slice r of
// every peer's gradients and writes the sum back into every peer's buffer (then a second
// barrier), or with zero1 into its own buffer only: its shard IS that slice of its own
// gradients and parameters, the update writes its parameters in place, and
// finish_update() copies the peers' slices straight out of their windows. Each rank reads its
// share of the peers' buffers once and writes it once, with no bounce buffers; nothing overlaps
// backward (one core per rank has no spare cycles to overlap with). After finish_reduction()
// and finish_update() return, no rank touches another's buffers.
//
// Compressed wire (options.wire = bf16 | fp16, parallel.grad_dtype; communicator exchange
// only): a bucket is cast down into a 16-bit wire buffer [buffer_size] (zero1: received into a
// 16-bit shard [update_size]) when it starts, reduced there by the communicator's 16-bit sum
// (fp32 arithmetic per partial sum), and cast back into the fp32 gradients when its request
// retires. Half the bytes of fp32; the parameters' ZeRO-1 all-gather stays fp32.
//
// PowerSGD (options.powersgd, powersgd.hpp), from its start step on: finish_reduction() runs
// it over the whole buffer after backward (no bucket overlap: its second all-reduce needs the
// first's result), then with zero1 copies this rank's pieces into the shard. set_step() tells
// which step runs.
//
// Everything (shard buffers, request array) is allocated in the constructor; the step allocates
// nothing. All traffic goes through Communicator, so the MPI and NCCL backends behave alike.
// Non-blocking collectives are started in the same order (highest bucket first) on every rank,
// and at most kMaxInFlight of them are outstanding: starting one more first waits for the
// oldest (the NCCL backend has a fixed pool of request events).
#pragma once

#include "trellis/comm/communicator.hpp"
#include "trellis/comm/node_shared_window.hpp"
#include "trellis/core/kokkos_types.hpp"
#include "trellis/core/param_window.hpp"
#include "trellis/core/precision.hpp"
#include "trellis/kernels/precision_cast.hpp"
#include "trellis/nn/parameter_store.hpp"
#include "trellis/parallel/powersgd.hpp"
#include "trellis/parallel/unit_exchange.hpp"
#include "trellis/parallel/zero_layout.hpp"

#include <cstddef>
#include <memory>
#include <vector>

namespace trellis {

struct GradientSyncOptions {
  std::size_t bucket_bytes = 25u << 20;  // parallel.bucket_mb
  bool overlap = true;  // launch buckets from grads_final_from() during the last backward
  int zero = 0;  // parallel.zero: 0 (none), 1 (optimizer state), 2 (+ gradients), 3 (+ params)
  // parallel.grad_exchange = shared_memory: the dp group's window, at least
  // shared_floats(buffer_size, zero1) floats per rank, whose part holds this rank's
  // gradients (the first buffer_size floats) and with zero1 its parameters (the next ones):
  // store.finalize(seed, part, zero1 ? part + buffer_size : nullptr). Outlives the
  // GradientSync. Null: the communicator does the exchange; bucket_bytes applies only then.
  NodeSharedWindow* shared = nullptr;
  // parallel.grad_dtype: the format gradients travel in (communicator exchange only).
  Precision wire = Precision::fp32;
  // parallel.zero_gather_dtype: the format ZeRO-3 gathers the units' parameters in.
  Precision gather = Precision::fp32;
  // ZeRO-2/3 with hybrid sharding (zero_groups.hpp): the group each shard is replicated over.
  // The communicator the sync is built on is then the shard group; each reduced piece is
  // all-reduced over this one before the update. Null: the shard group is the whole dp group.
  Communicator* replica = nullptr;
  // parallel.powersgd_*: low-rank compression from its start step on (communicator exchange,
  // fp32 wire only); before it, and with rank 0, the plain exchange.
  PowerSgdOptions powersgd;
};

class GradientSync : public nn::GradReadyListener {
 public:
  // Most requests outstanding at once (below NcclCommunicator::kEventSlots).
  static constexpr std::size_t kMaxInFlight = 32;

  // Floats the store's buffer must be a multiple of: dp_size * ParameterStore::kAlignment.
  // Call store.pad_to_multiple(padding_multiple(dp)) after the model is built, before finalize().
  static std::size_t padding_multiple(int dp_size);
  // Floats per rank of a shared window for options.shared: the gradients, then (zero1) the
  // parameters the peers gather from.
  static std::size_t shared_floats(std::size_t buffer_size, bool zero1);

  // store: finalized, buffer_size() a multiple of padding_multiple(dp.size()) (Error
  // otherwise). Registers itself as the store's gradient listener; the destructor detaches it.
  // dp and store must outlive it.
  GradientSync(Communicator& dp, nn::ParameterStore& store, const GradientSyncOptions& options);
  // Detaches from the store. Requests still in flight (a step abandoned by an exception) are
  // not waited for: the other ranks may never start them.
  ~GradientSync() override;
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  // Before each step: the 0-based optimizer step about to run (whether PowerSGD is on).
  void set_step(std::int64_t step);
  bool powersgd_active() const { return powersgd_now_; }
  // The PowerSGD state (checkpoints); null when PowerSGD is off.
  PowerSgd* powersgd() { return powersgd_.get(); }
  const PowerSgd* powersgd() const { return powersgd_.get(); }

  // Before each micro-batch's backward: true arms the overlap (the last micro-batch of a step).
  // Throws if buckets of an unfinished reduction are still in flight.
  void begin_backward(bool last_micro_batch);
  // When armed and overlapping: starts every not-yet-started bucket lying wholly at offsets
  // >= offset, and test()s the requests in flight so that MPI progresses them.
  void grads_final_from(std::size_t offset) override;
  // Buckets holding any of [0, end_offset) are never started early: their gradients need
  // more work after backward (the GPT's tied table, summed over two pipeline stages first).
  void hold_back(std::size_t end_offset) { hold_below_ = end_offset; }
  // Starts the buckets not started yet, waits for all. update_grads() then holds the SUM of
  // the gradients over the dp ranks (not sharded: store.grads() itself; zero1: the shard,
  // while the rest of store.grads() keeps this rank's local gradients).
  void finish_reduction();

  // Where clipping and the optimizer step work: the whole flat buffers, or (zero1) this rank's
  // shard. update_grads() is [update_size()]; the parameters of update element i are
  // update_windows()' (in place in store.params()).
  bool sharded() const { return options_.zero >= 1; }
  int zero_stage() const { return options_.zero; }
  // Hybrid sharding: this rank's index in its replica group (0 without one). Replicas hold the
  // same shard: only replica 0's is written.
  int replica_rank() const { return options_.replica != nullptr ? options_.replica->rank() : 0; }
  // ZeRO-3: the parameters of the update space live in shard_params() [update_size], not in
  // store.params() (which holds the outer ranges and the unit slots).
  bool params_sharded() const { return options_.zero >= 3; }
  const FloatView& shard_params() const { return shard_params_; }
  // ZeRO-2/3: the per-unit exchange (gather counts for the log); null otherwise.
  const UnitExchange* unit_exchange() const { return exchange_.get(); }
  std::size_t update_size() const { return update_size_; }
  const std::vector<ParamWindow>& update_windows() const { return windows_; }
  const FloatView& update_grads() const;
  // This rank's shard elements of a [buffer_size()] view (decay mask, norm mask), as a NEW
  // view [update_size()]; the full view itself when not sharded. Setup time only (allocates).
  ConstMaskView gather_shard(ConstMaskView full) const;

  // zero1: all-gathers every rank's updated pieces in place in store.params() (every bucket
  // started non-blocking, then all waited for). Not sharded: nothing.
  void finish_update();
  // Where this rank's update elements sit: [flat_begin, flat_end) of the flat buffers is
  // [shard_offset, shard_offset + flat_end - flat_begin) of the update views, in flat order.
  // zero1: one range per bucket (the rank's piece of it); not sharded: the whole buffer.
  struct ShardRange {
    std::size_t flat_begin = 0, flat_end = 0, shard_offset = 0;
  };
  std::vector<ShardRange> shard_ranges() const;

  // Gradient bytes this rank sends per step through the dp exchange, by the usual ring
  // accounting (all-reduce 2 (p - 1) / p of the buffer, reduce-scatter (p - 1) / p; the same
  // for the shared-memory exchange's reads), in the wire format and as fp32 would send them.
  double wire_bytes_per_step() const;
  double fp32_bytes_per_step() const;

  std::size_t bucket_count() const { return buckets_.size(); }
  // Buckets of the last finish_reduction() that grads_final_from() had already started.
  std::size_t buckets_started_early() const { return started_early_; }

 private:
  struct Bucket {
    std::size_t begin = 0;  // [begin, end) of the flat buffers
    std::size_t end = 0;
    std::size_t piece = 0;         // (end - begin) / dp: one rank's share
    std::size_t shard_offset = 0;  // s_b: where this rank's piece sits in the update space
    long unit = -1;                // ZeRO-2/3: the layout unit it is (-1: an outer bucket)
    std::size_t grads_at = 0;      // physical begin in store.grads() / store.params()
    std::size_t params_at = 0;
  };
  // ZeRO-2/3 setup: the buckets from the layout, the shard, the unit exchange.
  void build_buckets(std::size_t bucket_elems, const ZeroLayout* layout);
  void build_zero_shard(const ZeroLayout& layout);

  // Starts bucket b's reduction (gather = false) or its all-gather (gather = true).
  void start_bucket(std::size_t b, bool gather);
  void wait_all();
  // Bucket b's request has completed: with a compressed wire, cast its sum back into fp32.
  void retire(std::size_t b);
  // The node shared-memory exchange (options_.shared).
  void reduce_shared();
  void gather_shared();

  Communicator& dp_;
  nn::ParameterStore& store_;
  GradientSyncOptions options_;
  int dp_size_ = 1;
  bool zero1_ = false;  // the optimizer's update space is this rank's shard (ZeRO >= 1)
  std::size_t update_size_ = 0;
  std::vector<Bucket> buckets_;
  std::vector<CommRequest> requests_;  // one per bucket, sized once
  std::vector<double> launched_us_;    // per bucket: trace time of its launch (-1: not traced)
  std::vector<std::size_t> order_;     // buckets in the order they were started, sized once
  std::size_t head_ = 0;               // order_[head_, tail_) may still be in flight
  std::size_t tail_ = 0;
  FloatView shard_grads_;             // zero1: [update_size] reduced gradients
  std::vector<ParamWindow> windows_;  // the parameters of the update space, in order
  bool armed_ = false;
  std::size_t hold_below_ = 0;
  std::size_t first_started_ = 0;  // buckets [first_started_, count) of this step are started
  std::size_t started_early_ = 0;
  std::vector<float*> peer_grads_;   // shared: every dp rank's gradients, by rank
  std::vector<float*> peer_params_;  // shared + zero1: every dp rank's parameters, by rank
  std::vector<float*> own_grads_;    // shared: {store.grads().data()}
  kernels::HalfView wire_;           // compressed wire: [buffer_size] 16-bit gradients
  kernels::HalfView shard_wire_;     // compressed wire + zero1: [update_size] reduced shard
  bool gathering_ = false;           // the requests in flight are finish_update()'s gathers
  std::unique_ptr<PowerSgd> powersgd_;
  FloatView shard_params_;  // ZeRO-3: [update_size] this rank's parameters
  std::unique_ptr<UnitExchange> exchange_;
  bool powersgd_now_ = false;
};

}  // namespace trellis
