// ParameterStore: every trainable parameter of a model in ONE flat parameter buffer and ONE
// flat gradient buffer, with named windows into them.
//
// Life cycle: layers add() their parameters while the model is built; finalize(seed) then
// allocates both buffers once, initialises every parameter and freezes the layout. After that,
// nothing is allocated: the training step works on windows of these two buffers, the DP
// all-reduce runs over contiguous ranges of grads(), ZeRO-1 shards params() by ranges, and
// checkpoints write each parameter by name (info(i): name, logical shape, offset).
//
// Layout: parameters in registration order, each starting at an offset that is a multiple of
// kAlignment floats (64 bytes: cache lines, vector loads, coalesced device access). Padding
// between parameters is zero in both buffers and has decay mask 0.
//
// Initialisation (see init.hpp): element e of parameter `name` is drawn from
// random_uniform / random_normal(seed, stream_from_name(name), e), so the initial model is a
// function of the seed and the names only: identical for any registration order, any number of
// ranks and any sharding of a tensor.
//
// Sharding (tensor parallelism): a parameter is registered with its LOGICAL shape and a
// ShardSpec; the store holds only this rank's piece (ParamInfo::shape), initialised with the
// draws of the logical elements it holds, so a sharded model starts exactly as the whole one.
//
// Replicas (pipeline parallelism keeps several micro-batches in flight, each in its own copy
// of a stage's layers and activation buffers): between begin_replica() and end_replica(),
// add() of a name already registered returns that parameter instead of a new one (same
// logical shape and shard required), so every replica reads and accumulates into the same
// params()/grads() windows. registration_cursor() follows along, so code that records "where
// my parameters start" works for replicas too.
//
// Overlapped gradient reduction: models call grads_final_from(offset) during backward when
// every gradient at offsets >= offset has received its last contribution of the call; the
// store passes it to a GradReadyListener (the data-parallel reducer), if one is set.
//
// Units and placement (ZeRO-2/3, parallel/zero_layout.hpp). A model marks the parameters of
// each block it runs one after another as a unit (BlockStack: begin_unit() before the block
// registers, end_unit() after). With a unit alignment set (dp x kAlignment), both pad the
// cursor to it, so each unit and each gap between units splits evenly over the dp ranks.
// place() then maps [logical_begin, logical_end) ranges of the flat space onto smaller
// PHYSICAL buffers: ZeRO-2 folds the gradients, ZeRO-3 also the parameters, of unit k onto
// slot k mod 2, which holds one unit at a time. ParamInfo::offset stays logical (the space
// shards, buckets and checkpoints address); param_vector(i), grad_vector(i), compute_operand(i)
// and params()/grads() address the physical buffers. A UnitListener (the ZeRO exchange) is
// told before a unit's forward and backward and after its backward, so that it gathers the
// unit's parameters into its slot and reduce-scatters the unit's gradients out of it.
#pragma once

#include "trellis/core/kokkos_types.hpp"
#include "trellis/core/memory_ledger.hpp"
#include "trellis/core/shape.hpp"
#include "trellis/kernels/gemm_half.hpp"
#include "trellis/kernels/precision_cast.hpp"
#include "trellis/kernels/random_fill.hpp"
#include "trellis/kernels/views.hpp"
#include "trellis/nn/autocast.hpp"
#include "trellis/nn/init.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace trellis::nn {

// How a parameter is split over the tensor-parallel group. dim < 0: every rank holds all of
// it (replicated). Otherwise logical dim `dim` is `sections` equal blocks (a fused q|k|v
// weight: 3), each cut into `parts` equal pieces; this rank holds piece `index` of every block.
struct ShardSpec {
  int dim = -1;
  int parts = 1;
  int index = 0;
  int sections = 1;

  static ShardSpec split(int dim, int parts, int index, int sections = 1);
  bool sharded() const { return dim >= 0 && parts > 1; }

  // Whether logical's dim `dim` splits into sections x parts equal pieces (true when not
  // sharded and every extent is non-negative).
  bool divides(const Shape& logical) const;
  // This rank's piece of a tensor of shape `logical`: dim `dim` divided by parts; row-major
  // [outer, sections, piece, inner] (outer: the dims before `dim`, inner: those after, piece =
  // logical[dim] / (sections x parts)). Throws Error for a negative extent, a dim or index out
  // of range, or an extent that does not divide.
  Shape piece_shape(const Shape& logical) const;
  // Piece element -> logical (row-major) element; the identity when not sharded.
  kernels::ShardIndexMap index_map(const Shape& logical) const;
};

struct ParamInfo {
  std::string name;     // hierarchical, e.g. "fc1.weight"
  Shape shape;          // this rank's shape, row-major, e.g. [out / tp, in]
  Shape logical_shape;  // the whole tensor's shape (== shape unless sharded)
  ShardSpec shard;
  std::size_t offset = 0;     // first element in params()/grads(), multiple of kAlignment
  std::size_t numel = 0;      // product of shape
  bool weight_decay = false;  // whether decoupled weight decay / L2 applies
  InitSpec init;
};

// Told during backward that gradients at offsets >= offset are final (see above).
class GradReadyListener {
 public:
  virtual ~GradReadyListener() = default;
  virtual void grads_final_from(std::size_t offset) = 0;
};

// [begin, end) of the logical flat space: the parameters of one unit.
struct UnitRange {
  std::size_t begin = 0, end = 0;
};

// Logical range [logical_begin, logical_end) lives at physical_begin of a physical buffer.
struct Placement {
  std::size_t logical_begin = 0, logical_end = 0, physical_begin = 0;
};

// Told as a model runs its units (see above); unit indices are those of ParameterStore::units().
class UnitListener {
 public:
  virtual ~UnitListener() = default;
  virtual void before_forward(std::size_t unit) = 0;
  virtual void before_backward(std::size_t unit) = 0;
  virtual void after_backward(std::size_t unit) = 0;
  // Between recomputing(true) and recomputing(false) forwards rerun inside backward.
  virtual void recomputing(bool on) { (void)on; }
};

class ParameterStore {
 public:
  static constexpr std::size_t kAlignment = 16;  // floats

  ParameterStore() = default;
  // Layers keep a pointer to the store they registered in: it neither copies nor moves.
  ParameterStore(const ParameterStore&) = delete;
  ParameterStore& operator=(const ParameterStore&) = delete;

  // Registers a parameter; returns its index. Throws for a duplicate or empty name, a negative
  // extent, or when called after finalize().
  std::size_t add(const std::string& name, const Shape& shape, const InitSpec& init,
                  bool weight_decay);
  // A sharded parameter: logical_shape is the whole tensor's. Throws ConfigError naming the
  // parameter when the split dim is not divisible by sections x parts.
  std::size_t add(const std::string& name, const Shape& logical_shape, const InitSpec& init,
                  bool weight_decay, const ShardSpec& shard);

  // Replica registration (see above). begin_replica(offset): offset is where the replicated
  // model's first parameter sits (registration_cursor() when the original was built).
  void begin_replica(std::size_t offset);
  void end_replica();
  // Where the next add() puts (or, in replica mode, finds) a parameter: buffer_size() normally;
  // in replica mode the end of the parameter add() returned last.
  std::size_t registration_cursor() const { return replica_ ? replica_cursor_ : buffer_size_; }

  // Units (see above). set_unit_alignment() before the first add(); begin_unit() returns the
  // unit's index (in replica mode: the original's unit at the same position).
  void set_unit_alignment(std::size_t floats);
  std::size_t begin_unit();
  void end_unit();
  const std::vector<UnitRange>& units() const { return units_; }
  void set_unit_listener(UnitListener* listener) { unit_listener_ = listener; }
  UnitListener* unit_listener() const { return unit_listener_; }

  // Placement (see above), before finalize(). An empty list keeps that buffer logical (the
  // identity). With the parameters placed (ZeRO-3) finalize() draws only the parameters that
  // belong to no unit; the owner draws each rank's share of the others (initialize_range) and
  // gathers units into their slots, calling refresh_unit_compute() after each gather.
  void place(std::vector<Placement> params, std::size_t param_floats, std::vector<Placement> grads,
             std::size_t grad_floats);
  bool params_placed() const { return !param_placement_.empty(); }
  std::size_t param_floats() const { return param_floats_; }  // physical, after place()
  std::size_t grad_floats() const { return grad_floats_; }
  // Whether parameter i lies in a unit.
  bool in_unit(std::size_t i) const;
  // Draws elements [begin, end) of parameter i's (local) piece into out [end - begin]: the
  // values finalize() would give them.
  void initialize_range(std::size_t i, std::size_t begin, std::size_t end,
                        kernels::Vector out) const;
  // The compute copy of the parameters in logical [begin, end), with the step of the last
  // refresh_compute_copy() (its stochastic draws).
  void refresh_compute_range(std::size_t begin, std::size_t end);

  // Grows buffer_size() to a multiple of `multiple` floats (ZeRO-1 shards and buckets must
  // divide evenly over the dp ranks); the padding is zero. Before finalize().
  void pad_to_multiple(std::size_t multiple);

  // Allocates params()/grads()/decay_mask(), initialises all parameters from `seed`, zeroes
  // the gradients. Once only. grad_memory / param_memory: [buffer_size()] floats the gradients
  // / parameters live in instead of allocations of their own (a node shared-memory window the
  // data-parallel peers read in place); they must outlive the store. Host-memory builds only.
  void finalize(std::uint64_t seed, float* grad_memory = nullptr, float* param_memory = nullptr);
  bool finalized() const { return finalized_; }
  std::uint64_t seed() const { return seed_; }

  std::size_t size() const { return infos_.size(); }  // number of parameters
  const ParamInfo& info(std::size_t i) const;
  std::optional<std::size_t> find(const std::string& name) const;
  std::size_t index(const std::string& name) const;  // like find, but throws if absent

  // Sum of numel over parameters (this rank's parameter count, without padding).
  std::int64_t num_elements() const { return num_elements_; }
  // Length of the flat buffers, padding included (known after add()s, before finalize()).
  std::size_t buffer_size() const { return buffer_size_; }

  // Whole flat buffers: [param_floats()] / [grad_floats()] (== buffer_size() unless placed).
  // Only after finalize().
  const FloatView& params() const;
  const FloatView& grads() const;
  // [buffer_size()]: 1 where weight decay applies, 0 elsewhere (padding included).
  const MaskView& decay_mask() const;
  // Drops the store's handle of decay_mask() (whoever took a copy or a shard keeps theirs);
  // decay_mask() is an Error after it.
  void release_decay_mask() { decay_mask_ = MaskView(); }

  // Parameter i's window [numel]: managed subviews, for optimizers, checkpoints and tests.
  // Placed parameters (ZeRO-3): only valid while parameter i's unit is in its slot.
  FloatView param(std::size_t i) const;
  FloatView grad(std::size_t i) const;
  // Unmanaged windows for the hot loop (no reference counting). The matrix forms need a 2-D
  // shape and view it as [shape[0], shape[1]] row-major.
  kernels::Vector param_vector(std::size_t i) const;
  kernels::Vector grad_vector(std::size_t i) const;
  Matrix param_matrix(std::size_t i) const;
  Matrix grad_matrix(std::size_t i) const;

  void zero_grads();

  // Mixed precision (autocast.hpp). GEMM layers read their weights through compute_vector() /
  // compute_matrix(): with autocast active, a copy of params() rounded to its format (to
  // nearest, or stochastically), which refresh_compute_copy() rebuilds and must follow every
  // change to params() (initialisation, optimizer step, checkpoint load); off, params()
  // itself. set_autocast() before finalize(); finalize() refreshes once.
  void set_autocast(const Autocast& autocast, bool stochastic_rounding = false);
  const Autocast& autocast() const { return autocast_; }
  // step: the optimizer steps taken, which keys the stochastic draws (stream per parameter
  // name and step, index = the logical element: the same bits on any layout).
  void refresh_compute_copy(std::int64_t step);
  // fp32 windows: the parameters, or their rounded copy with emulated kernels; Error with
  // native kernels, whose copy is 16-bit (compute_operand, compute_half).
  kernels::Vector compute_vector(std::size_t i) const;
  Matrix compute_matrix(std::size_t i) const;
  // Parameter i as a GEMM operand [shape[0], numel / shape[0]], in whichever form the layers'
  // GEMMs read it (fp32, rounded fp32, or 16-bit words).
  kernels::GemmOperand compute_operand(std::size_t i) const;
  // Native kernels: parameter i's 16-bit words [numel].
  kernels::ConstHalfVector compute_half(std::size_t i) const;

  // Backward progress (see above). The listener is not owned; nullptr detaches it.
  void set_grad_listener(GradReadyListener* listener) { listener_ = listener; }
  void grads_final_from(std::size_t offset) const {
    if (listener_ != nullptr) listener_->grads_final_from(offset);
  }

  // (Re)draws parameter i's initial values from its InitSpec (finalize() does this for all).
  void initialize(std::size_t i);

 private:
  void require_finalized(const char* what) const;
  // Parameter i's window of a physical buffer that follows the parameters' (or, with
  // grads = true, the gradients') placement.
  kernels::Vector param_window(const FloatView& buffer, std::size_t i, bool grads = false) const;
  Matrix matrix_window(const FloatView& buffer, std::size_t i, bool grads = false) const;
  void resolve_placement();  // param_at_, grad_at_ from the placements
  void refresh_param(std::size_t i);
  static std::size_t physical(const std::vector<Placement>& placement, std::size_t offset,
                              std::size_t numel, const std::string& name);

  std::vector<ParamInfo> infos_;
  std::unordered_map<std::string, std::size_t> by_name_;
  std::int64_t num_elements_ = 0;
  std::size_t buffer_size_ = 0;
  bool finalized_ = false;
  std::uint64_t seed_ = 0;
  GradReadyListener* listener_ = nullptr;
  bool replica_ = false;
  std::size_t replica_cursor_ = 0;
  std::size_t unit_alignment_ = 0;
  std::vector<UnitRange> units_;
  std::size_t replica_units_ = 0;  // units begun in the current replica
  UnitListener* unit_listener_ = nullptr;
  std::vector<Placement> param_placement_, grad_placement_;  // empty: identity
  std::size_t param_floats_ = 0, grad_floats_ = 0;
  std::vector<std::size_t> param_at_, grad_at_;    // per parameter: its physical offsets
  std::int64_t compute_step_ = 0;                  // of the last refresh_compute_copy()
  FloatView params_;                               // [param_floats_]
  FloatView grads_;                                // [grad_floats_]
  TrackedBytes external_params_, external_grads_;  // in the ledger when the caller's memory
  MaskView decay_mask_;                            // [buffer_size_] 1 where decay applies
  Autocast autocast_;
  bool stochastic_rounding_ = false;
  FloatView compute_params_;  // [param_floats_] params rounded to autocast_.mode; emulated only
  kernels::HalfView compute_half_;  // [param_floats_] params in 16 bits; native only
};

}  // namespace trellis::nn
