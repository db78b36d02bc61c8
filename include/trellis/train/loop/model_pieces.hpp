// The tensors of a model as this rank's pieces of the logical ones (tensor_file.hpp): what a
// checkpoint or model.h5 holds, and what reading one fills. Each parameter is one piece per
// rank, or with ZeRO one piece per shard range this rank updates; every piece is written once
// (owns_piece, and replica 0 of a hybrid-sharded group); nobody gathers the model.
#pragma once

#include "trellis/comm/process_grid.hpp"
#include "trellis/train/files/tensor_piece.hpp"
#include "trellis/train/loop/training_model.hpp"

#include <vector>

namespace trellis {

// params/<name>, buffers/<name>, and with_optimizer optim/<state>/<name>.
std::vector<TensorPiece> model_pieces(TrainingModel& model, const ProcessGrid& grid,
                                      bool with_optimizer);

}  // namespace trellis
