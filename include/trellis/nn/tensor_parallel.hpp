// Tensor parallelism (Megatron-LM, Shoeybi et al. 2019): what a layer needs to know to hold a
// slice of a logical layer and keep the whole computation exact.
//
// A column-parallel Linear holds rows [r * out/tp, (r + 1) * out/tp) of W [out, in] (and of
// b): it reads the whole input and writes its slice of the output columns; backward
// all-reduces the input gradient over tp. A row-parallel Linear holds columns of W: it reads
// the matching slice of its input, all-reduces its partial output over tp, then adds the
// (replicated) bias; backward needs no communication. Column then row (MLP: c_fc, c_proj;
// attention: heads) costs one all-reduce forward and one backward per pair, and everything
// between them (activations, dropout, attention per head) works on local slices.
//
// Layers that sit on whole activations (LayerNorm, residual adds, position embeddings) are
// replicated: every tp rank computes the same thing on the same data, and their parameters'
// gradients come out identical on every tp rank without communication.
//
// Sequence parallelism (Korthikanti et al. 2022, Megatron-SP; `sequence`): the transformer
// blocks keep their residual stream split by token rows over the tp group instead, each rank
// [rows / tp, d]: norms, residual adds and the blocks' saved inputs on a tp-th of the rows.
// Before a column-parallel Linear the norm's rows are all-gathered; the row-parallel Linear's
// partial output is reduce-scattered back to rows instead of all-reduced (same bytes: an
// all-reduce is a reduce-scatter plus an all-gather), and backward mirrors it. The norms'
// parameter gradients, each rank's over its own rows, are summed over tp (transformer.hpp).
#pragma once

#include "trellis/comm/communicator.hpp"
#include "trellis/nn/buffer_pool.hpp"

namespace trellis::nn {

struct TensorParallel {
  Communicator* comm = nullptr;  // the tp axis of the process grid; nullptr: no tp
  bool sequence = false;         // parallel.sequence_parallel (transformer blocks, tp > 1)

  int size() const { return comm != nullptr ? comm->size() : 1; }
  int rank() const { return comm != nullptr ? comm->rank() : 0; }
  bool active() const { return size() > 1; }
};

// How a Linear is split over the tp group.
enum class Split { none, column, row };

}  // namespace trellis::nn
