// `trellis export --weights IN --out OUT --prune`: the model of a structurally pruned run
// (prune.method = structured) made really smaller. Every unit whose weight row and followers
// are all zero (nn::PrunableUnits: an MLP neuron with its bias, a CNN block's inner channel
// with its BatchNorm) is removed with its column of the consumer, so the exported model has
// fewer neurons or channels (model.hidden, model.block_widths) and computes exactly what the
// pruned one computed. OUT is a weights file like IN (weights_file.hpp) whose configuration
// holds the new widths, so `trellis eval` and `trellis quantize` take it as it is.
#pragma once

#include "trellis/core/log.hpp"
#include "trellis/core/shape.hpp"

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

namespace trellis {

struct ExportOptions {
  std::string weights;  // IN
  std::string out;      // OUT
  bool prune = false;   // remove the pruned units (the only transformation so far)
};

// The elements of x (row-major, `shape`) whose index along `dim` is in `keep` (ascending):
// the result has shape[dim] = keep.size(). Throws Error for a dim or index out of range.
std::vector<float> select_along(const std::vector<float>& x, const Shape& shape, int dim,
                                const std::vector<std::int64_t>& keep);

// Collective over world (rank 0 does the work); errors reach every rank.
void export_command(MPI_Comm world, const ExportOptions& options, const Logger& log);

}  // namespace trellis
