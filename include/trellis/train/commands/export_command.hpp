// `trellis export --weights IN --out OUT --prune`: the model of a structurally pruned run
// (prune.method = structured) made really smaller. Every unit whose weight row and followers
// are all zero (nn::PrunableUnits: an MLP neuron with its bias, a CNN block's inner channel
// with its BatchNorm) is removed with its column of the consumer, so the exported model has
// fewer neurons or channels (model.hidden, model.block_widths) and computes exactly what the
// pruned one computed. OUT is a weights file like IN (weights_file.hpp) whose configuration
// holds the new widths, so `trellis eval` and `trellis quantize` take it as it is.
//
// `trellis export --format hf --weights IN --out DIR [--dtype fp32|bf16|fp16] [--shard-mb N]`:
// a decoder (model.type gpt or llama) as a Hugging Face model folder that transformers loads
// with from_pretrained (hf_export.cpp; train/hf/ says what maps to what): config.json and
// the weights in safetensors files, sharded above N MiB. DIR is written as DIR.tmp and renamed
// into place, so an interrupted export leaves no half folder under DIR.
#pragma once

#include "trellis/core/log.hpp"
#include "trellis/core/precision.hpp"
#include "trellis/core/shape.hpp"

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

namespace trellis {

struct ExportOptions {
  std::string weights;                // IN
  std::string out;                    // OUT
  std::string format = "trellis";     // trellis (a weights file) | hf (a Hugging Face folder)
  bool prune = false;                 // trellis: remove the pruned units
  Precision dtype = Precision::fp32;  // hf: the tensors' dtype
  double shard_mb = 5000;             // hf: the largest safetensors file (MiB) before sharding
};

// The elements of x (row-major, `shape`) whose index along `dim` is in `keep` (ascending):
// the result has shape[dim] = keep.size(). Throws Error for a dim or index out of range.
std::vector<float> select_along(const std::vector<float>& x, const Shape& shape, int dim,
                                const std::vector<std::int64_t>& keep);

// Collective over world (rank 0 does the work); errors reach every rank.
void export_command(MPI_Comm world, const ExportOptions& options, const Logger& log);

// The Hugging Face folder (--format hf) of a decoder's weights file; one rank, not collective.
// ConfigError naming the model.* key the transformers class cannot express.
void export_hf(const ExportOptions& options, const Logger& log);

}  // namespace trellis
