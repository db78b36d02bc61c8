#include "trellis/train/loop/model_pieces.hpp"

#include "trellis/parallel/tensor_ownership.hpp"

#include <algorithm>

namespace trellis {

std::vector<TensorPiece> model_pieces(TrainingModel& model, const ProcessGrid& grid,
                                      bool with_optimizer) {
  const GridCoords& at = grid.coords();
  const nn::ParameterStore& store = model.store();
  std::vector<TensorPiece> pieces;
  auto piece_of = [&](const std::string& name, const nn::ParamInfo& info, DpCopies dp) {
    TensorPiece piece;
    piece.name = name;
    piece.logical_shape = info.logical_shape;
    piece.shard = info.shard;
    piece.writer = owns_piece(info.shard.sharded(), model.is_stage_copy(info.name), dp, at) &&
                   (dp == DpCopies::identical || model.sync().replica_rank() == 0);
    return piece;
  };
  // What lives in the update views ([update size]: the whole flat buffer, or with ZeRO this
  // rank's shard, one piece per bucket): each rank writes and reads its own ranges of each
  // parameter's piece (sharded: DpCopies::distinct), nobody gathers.
  const GradientSync& sync = model.sync();
  const DpCopies dp = sync.sharded() ? DpCopies::distinct : DpCopies::identical;
  const std::vector<GradientSync::ShardRange> ranges = sync.shard_ranges();
  const auto add_ranges = [&](const std::string& prefix, const FloatView& view) {
    for (std::size_t i = 0; i < store.size(); ++i) {
      const nn::ParamInfo& info = store.info(i);
      for (const GradientSync::ShardRange& range : ranges) {
        const std::size_t first = std::max(info.offset, range.flat_begin);
        const std::size_t end = std::min(info.offset + info.numel, range.flat_end);
        if (first >= end) continue;
        TensorPiece piece = piece_of(prefix + info.name, info, dp);
        if (first != info.offset || end != info.offset + info.numel) {
          piece.range_begin = first - info.offset;
          piece.range_end = end - info.offset;
        }
        const std::size_t local = range.shard_offset + (first - range.flat_begin);
        piece.local = slice(view, local, local + (end - first));
        pieces.push_back(std::move(piece));
      }
    }
  };
  if (sync.params_sharded()) {  // ZeRO-3: no rank holds a whole parameter
    add_ranges("params/", sync.shard_params());
  } else {
    for (std::size_t i = 0; i < store.size(); ++i) {
      TensorPiece piece =
          piece_of("params/" + store.info(i).name, store.info(i), DpCopies::identical);
      piece.local = store.param(i);
      pieces.push_back(std::move(piece));
    }
  }
  if (with_optimizer)
    for (const auto& [state_name, view] : model.optimizer().state())
      add_ranges("optim/" + state_name + "/", view);
  // Model buffers (BatchNorm running statistics) are equal on every rank that holds them.
  for (const nn::NamedBuffer& buffer : model.model().buffers()) {
    TensorPiece piece;
    piece.name = "buffers/" + buffer.name;
    piece.logical_shape = {static_cast<std::int64_t>(buffer.data.extent(0))};
    piece.writer = owns_piece(false, false, DpCopies::identical, at);
    piece.local = FloatView(buffer.data.data(), buffer.data.extent(0));
    pieces.push_back(std::move(piece));
  }
  // Pipeline stages pass different lists: write_checkpoint/read_checkpoint take the union and
  // let each rank join the collective calls for the other stages' tensors with no data.
  return pieces;
}

}  // namespace trellis
