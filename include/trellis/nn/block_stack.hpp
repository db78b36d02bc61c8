// BlockStack: the run of blocks a model applies one after another (a Gpt stage's transformer
// blocks, a CNN's residual blocks; each block's input is the previous one's output), and what
// it does for memory:
//
// Shared backward scratch. What a block writes and reads only inside its backward (input
// gradients, dz, dh, ...) lives in one of two pools (nn/buffer_pool.hpp), block i in pool
// i mod 2: block i's input gradient, read by block i - 1's backward, is never overwritten by
// it. So backward scratch costs two blocks' worth, not one per block. What a block writes and
// reads inside one forward (role `transient`: a branch output the residual add reads at once,
// the fp32 GEMM result a 16-bit epilogue rounds) lives in one pool for all blocks.
//
// Activation recomputation (RecomputeSpec::full, Chen et al. 2016's checkpointing, Megatron's
// full recompute with the uniform method): blocks form groups of `every` consecutive blocks.
// Only each group's output is kept (a checkpoint [capacity rows, width]); the blocks' own
// saved buffers come from `every` pools shared by all groups (block i's from pool i mod
// every). Backward reruns a group's forward from its input (the previous checkpoint, or the
// stack's input) with the same StepContext, then runs its backward. Dropout masks come from the
// counter RNG and every kernel is deterministic on a host, so the rerun reproduces the saved
// activations bit for bit and the gradients equal a run without recomputation exactly. A group
// costs one more forward in backward (a training step of ~4 forwards' work instead of 3).
//
// A recomputed forward runs with StepContext::recomputing set: layers with state (BatchNorm's
// running statistics) leave it as the first forward left it.
//
// Selective recomputation (RecomputeSpec::selective, llm.c's recompute and Megatron's
// recompute_modules for the cheap parts): what is cheap to recompute and large to keep, the
// norms' outputs (ln_1, ln_2: one pass over [rows, d] from the kept input and statistics) and
// the MLP activation's output (GELU from its kept pre-activation, SwiGLU from the kept gate
// and up: [rows, d_ff]), with their autocast copies, comes from one pool shared by all blocks
// (role `cheap`, nn/buffer_pool.hpp); each block recomputes it in its backward just before the
// layer that reads it. The attention is not recomputed: with flash attention nothing of size T x T
// is kept, and its outputs cost GEMMs. Bitwise equal gradients as with full recomputation.
//
// Units (ZeRO-2/3): given the parameter store, each block's parameters form one unit of it
// (ParameterStore::begin_unit / end_unit around the block's construction), and the store's
// UnitListener hears of every block forward (recomputed ones included), before every block
// backward and after it: there the data-parallel exchange gathers a block's sharded
// parameters and reduce-scatters its gradients.
//
// Memory per stack, rows = capacity rows, A = one block's saved bytes per row, C = its cheap
// part (2 d + d_ff floats):
//   none       n_block * A * rows                     + 2 scratch blocks + 1 transient
//   selective  n_block * (A - C) * rows + C * rows    + 2 scratch blocks + 1 transient
//   full       (n_block / every) * width * 4 * rows   + every * A * rows + 2 scratch blocks
//                                                     + 1 transient
#pragma once

#include "trellis/core/kokkos_types.hpp"
#include "trellis/nn/buffer_pool.hpp"
#include "trellis/nn/layer.hpp"
#include "trellis/nn/parameter_store.hpp"

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace trellis::nn {

enum class Recompute { none, selective, full };

struct RecomputeSpec {
  Recompute mode = Recompute::none;
  int every = 1;  // blocks per recomputed group (full)
};

// "none" | "selective" | "full"; ConfigError naming memory.recompute otherwise.
Recompute parse_recompute(const std::string& name);
const char* recompute_name(Recompute mode);

class BlockStack {
 public:
  // name: the allocation label stem of the pools ("h"); capacity_rows: every block's capacity;
  // units: the store the blocks register in, to make each block a unit of it (or null).
  BlockStack(const std::string& name, RecomputeSpec spec, int capacity_rows,
             ParameterStore* units = nullptr);
  BlockStack(const BlockStack&) = delete;
  BlockStack& operator=(const BlockStack&) = delete;

  // Build block i (the i-th added, from 0) while the returned scope lives, then add() it.
  SharedBufferScope building(std::size_t i);
  void add(Layer& block);  // not owned; must outlive the stack's calls
  void finish();           // after the last add(): the last group's checkpoint

  // x: [>= n, first block's in_features], unchanged until backward. Returns the last block's
  // output [capacity, out_features] (rows [0, n) valid): a checkpoint with recomputation, else
  // its output().
  ConstMatrix forward(ConstMatrix x, int n, const StepContext& ctx);
  // Block i's output as the next block should read it: copied into its group's checkpoint
  // when block i ends a recomputed group (its own buffer is shared), else out itself. For
  // callers that run the blocks themselves (generation's cached forward).
  ConstMatrix keep(std::size_t i, ConstMatrix out, int n);
  // dy: [>= n, last block's out_features]; runs the blocks' backward in reverse (recomputing
  // each group's forward first), calling block_done(i) after block i. Returns the first
  // block's input gradient [capacity, in_features].
  ConstMatrix backward(ConstMatrix dy, int n, const std::function<void(std::size_t)>& block_done);

  std::size_t size() const { return blocks_.size(); }
  bool recomputes() const { return spec_.mode == Recompute::full; }
  const RecomputeSpec& spec() const { return spec_; }

 private:
  bool ends_group(std::size_t i) const {
    return (i + 1) % static_cast<std::size_t>(spec_.every) == 0 || i + 1 == blocks_.size();
  }

  // The store's unit listener, told of block i (nothing without units or a listener).
  void before_forward(std::size_t i) const;
  void before_backward(std::size_t i) const;
  void after_backward(std::size_t i) const;

  std::string name_;
  RecomputeSpec spec_;
  ParameterStore* units_store_ = nullptr;
  std::vector<std::size_t> unit_of_;  // block i's unit index in the store
  int capacity_;
  std::unique_ptr<BufferPool> scratch_[2];
  std::vector<std::unique_ptr<BufferPool>> saved_;  // [every] with full recomputation
  std::unique_ptr<BufferPool> cheap_;               // selective recomputation
  std::unique_ptr<BufferPool> transient_;           // forward-only buffers, all blocks
  std::vector<Layer*> blocks_;
  std::vector<FloatView> checkpoints_;  // [groups][capacity * out_features]: each group's output
  bool finished_ = false;
  ConstMatrix input_;  // the last forward's input rows
  StepContext ctx_;
  int last_n_ = -1;
};

}  // namespace trellis::nn
