// Buffers that layers share: backward scratch common to every transformer block, and the
// activations of recomputed blocks (nn/block_stack.hpp).
//
// A layer asks for each buffer with the role it plays (layer_buffer below):
//   saved    written by forward, read by backward (outputs, pre-activations, statistics)
//   scratch  written and read within one backward call (input gradients, dz, dh), or within
//            one forward call and nothing kept
//   cheap    saved, but cheap to recompute from other saved buffers (a norm's output, the
//            GELU/SwiGLU output): shared by all blocks under selective recomputation, where
//            the block recomputes it just before its backward reads it; else as `saved`
//   transient  written and read within one forward (or recomputation) of one block, and
//            never by its backward (the fp32 GEMM result under a 16-bit epilogue, a branch
//            output the residual add reads at once): one pool shared by all blocks
//   own      never shared (a checkpoint, the loss' buffers, pipeline transfers)
// Outside any SharedBufferScope the request is an ordinary allocation of its own. While a
// scope is alive (one per block, around its construction), the k-th request of a role is
// served from slot k of that role's pool instead, so blocks built under the same pool use the
// same memory for their k-th buffer. That is only correct when at most one of those blocks
// needs its buffers at a time, which the block stack guarantees: scratch pools alternate
// between neighbouring blocks (block i's input gradient is read while block i - 1 runs
// backward), a recomputed block reruns its forward just before its backward, and no two
// blocks run forward at once.
//
// Constant or persistent buffers (a zero bias, weight copies, running statistics) are small
// and allocated directly: never shared.
//
// While a BufferCensus is alive, layer_buffer() and the pools allocate nothing: they record
// each buffer's label and size in the census' ledger and hand out empty views. A model built
// so (never run) tells what it would allocate, category by category, without the memory:
// the memory plan of a configuration (train/config/memory_plan.hpp) is made that way.
#pragma once

#include "trellis/core/kokkos_types.hpp"
#include "trellis/core/memory_ledger.hpp"
#include "trellis/kernels/precision_cast.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace trellis::nn {

enum class BufferRole { saved, scratch, cheap, transient, own };

// Slots by request order. A slot grows when a later block asks for more (the earlier blocks
// keep the smaller one, so differently shaped blocks still work, sharing less).
class BufferPool {
 public:
  // label: the slots' allocation label prefix ("trellis::recompute::h.saved"), which also
  // gives their memory category (core/memory_ledger.hpp).
  explicit BufferPool(std::string label) : label_(std::move(label)) {}
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // [floats] of slot `index` (a window onto it, sharing its reference count).
  FloatView floats(std::size_t index, std::size_t floats);
  // [count] 16-bit words over slot `index`; unmanaged: valid while this pool lives.
  kernels::HalfView halves(std::size_t index, std::size_t count);

  std::int64_t bytes() const;  // the current slots together
  std::size_t slots() const { return slots_.size(); }

 private:
  FloatView& slot(std::size_t index, std::size_t floats);

  std::string label_;
  std::vector<FloatView> slots_;     // empty views for slots sized under a census
  std::vector<std::size_t> sizes_;   // [slots] floats
  std::vector<FloatView> outgrown_;  // replaced slots that 16-bit windows may still point into
};

// While alive, layer_buffer() serves `saved` requests from `saved`, `scratch` ones from
// `scratch`, `cheap` ones from `cheap`, else from `saved`, and `transient` ones from
// `transient`, else from `scratch` (any may be null: ordinary allocations for that role). Scopes
// nest; the previous one is restored at destruction. Construction of a model is single-threaded,
// and the scope is per thread.
class SharedBufferScope {
 public:
  SharedBufferScope(BufferPool* saved, BufferPool* scratch, BufferPool* cheap = nullptr,
                    BufferPool* transient = nullptr);
  ~SharedBufferScope();
  SharedBufferScope(const SharedBufferScope&) = delete;
  SharedBufferScope& operator=(const SharedBufferScope&) = delete;

  FloatView take(BufferRole role, std::size_t floats);
  kernels::HalfView take_halves(BufferRole role, std::size_t count);
  bool shares(BufferRole role) const { return pool(role) != nullptr; }

 private:
  BufferPool* pool(BufferRole role) const;
  std::size_t& next(BufferRole role);

  BufferPool* saved_;
  BufferPool* scratch_;
  BufferPool* cheap_;
  BufferPool* transient_;
  std::size_t saved_next_ = 0, scratch_next_ = 0, cheap_next_ = 0, transient_next_ = 0;
  SharedBufferScope* previous_;
};

// While alive, buffers are counted in `census` instead of allocated (above). Per thread.
class BufferCensus {
 public:
  explicit BufferCensus(MemoryLedger& census);
  ~BufferCensus();
  BufferCensus(const BufferCensus&) = delete;
  BufferCensus& operator=(const BufferCensus&) = delete;

  // The census of this thread, or nullptr.
  static MemoryLedger* active();

 private:
  MemoryLedger* previous_;
};

// A layer's buffer of `floats` values (zero-filled when its own; a shared one holds whatever
// the last user left). label: the allocation label used when it is the layer's own.
FloatView layer_buffer(BufferRole role, const std::string& label, std::size_t floats);
kernels::HalfView layer_half_buffer(BufferRole role, const std::string& label, std::size_t count);

}  // namespace trellis::nn
