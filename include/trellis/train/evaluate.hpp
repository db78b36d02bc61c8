// Evaluation of a classifier on a labelled dataset, split over data-parallel ranks: rank r of
// dp takes the contiguous block [floor(r*N/dp), floor((r+1)*N/dp)) in batches, and the loss
// and correct-prediction sums are reduced over dp, so every rank gets the global result.
#pragma once

#include "trellis/comm/mpi_comm.hpp"
#include "trellis/core/log.hpp"
#include "trellis/data/sample_dataset.hpp"
#include "trellis/nn/mlp.hpp"
#include "trellis/nn/softmax_xent.hpp"
#include "trellis/train/batch_buffers.hpp"

#include <mpi.h>

#include <cstdint>
#include <string>

namespace trellis {

struct EvalResult {
  double loss = 0;      // mean cross-entropy over the dataset
  double accuracy = 0;  // fraction of correct argmax predictions
  std::int64_t samples = 0;
};

// batch_rows: samples per forward call, at most the model's and the buffers' capacity.
EvalResult evaluate_classifier(nn::Mlp& model, nn::SoftmaxCrossEntropy& loss, SampleDataset& data,
                               BatchBuffers& buffers, std::int64_t batch_rows, const MpiComm& dp);

// `trellis eval`: rebuilds the model from the configuration stored in a weights file, loads
// the weights and prints loss and accuracy on `data_spec`, all ranks sharing the work.
void evaluate_weights_command(MPI_Comm world, const std::string& weights_path,
                              const std::string& data_spec, std::int64_t batch, const Logger& log);

}  // namespace trellis
