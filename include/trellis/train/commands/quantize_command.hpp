// `trellis quantize --weights model.h5 --calib DATA --out model.int8.h5`: post-training int8
// quantization (int8/calibration.hpp, int8/quantize_layer.hpp) of every Linear and Conv2d of an
// mlp, cnn or gpt (a convolution's BatchNorm folded in). The calibration runs the fp32 model on the
// first `batches` x `batch` samples of DATA split over the ranks; each layer's input range
// (min/max, then a histogram) is reduced over the ranks, so any rank count chooses the same scales
// for the same samples. Rank 0 writes the int8 file (train/int8_weights.hpp). `trellis eval` and
// `trellis generate` run it.
#pragma once

#include "trellis/core/log.hpp"

#include <mpi.h>

#include <cstdint>
#include <string>

namespace trellis {

struct QuantizeOptions {
  std::string weights, calib, out;
  std::string method = "entropy";  // minmax | percentile | entropy
  double percentile = 99.99;       // percentile: the share of |x| kept unclipped, in percent
  std::int64_t batches = 8;        // calibration batches (over all ranks)
  std::int64_t batch = 256;        // samples per batch
};

// Collective over world; errors reach every rank (run_agreed).
void quantize_command(MPI_Comm world, const QuantizeOptions& options, const Logger& log);

// quantize's --out when none is given: "runs/x/model.h5" -> "runs/x/model.int8.h5" (beside
// the weights; a name without .h5 gets .int8.h5 appended).
std::string default_int8_path(const std::string& weights);

}  // namespace trellis
