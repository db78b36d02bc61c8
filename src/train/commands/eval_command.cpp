// `trellis eval` (command.hpp): rebuilds the model from the configuration stored in a weights
// file (an int8 file's model converted to its int8 form, int8/int8_model.hpp), loads the weights
// and prints loss, accuracy and throughput on a dataset, all ranks sharing the work. --cache: each
// rank reads its share into memory first, so the throughput is the model's, not the file system's.
// --tp / --pp / --zero 3: the model spread over the ranks (sharded_model.hpp), for a model larger
// than one rank; the ranks of one model copy share a dp slot of the data.
#include "trellis/comm/agreement.hpp"
#include "trellis/comm/mpi_check.hpp"
#include "trellis/core/format.hpp"
#include "trellis/core/memory_ledger.hpp"
#include "trellis/kernels/int8.hpp"
#include "trellis/train/commands/command.hpp"
#include "trellis/train/commands/saved_model.hpp"
#include "trellis/train/commands/sharded_model.hpp"
#include "trellis/train/config/memory_estimate.hpp"
#include "trellis/train/input/data_factory.hpp"
#include "trellis/train/loop/evaluate.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace trellis {

namespace {

// "; peak memory 12.3 MiB per rank (parameters 4.1 MiB)": the largest rank's, measured.
std::string peak_memory(MPI_Comm world) {
  const MemorySnapshot books = process_memory_ledger().snapshot();
  std::int64_t mine[2] = {books.peak_total,
                          books.peak[static_cast<int>(MemoryCategory::parameters)]};
  std::int64_t most[2] = {0, 0};
  TRELLIS_MPI(MPI_Allreduce(mine, most, 2, MPI_INT64_T, MPI_MAX, world));
  return "; peak memory " + format_bytes(static_cast<double>(most[0])) + " per rank (parameters " +
         format_bytes(static_cast<double>(most[1])) + ")";
}

void evaluate_weights(MPI_Comm world, const std::string& weights_path, const std::string& data_spec,
                      std::int64_t batch, const Logger& log, bool cache_in_memory,
                      const ModelLayout& layout) {
  // One model copy per dp slot: the whole world unsharded, else the grid's dp group.
  std::unique_ptr<ProcessGrid> grid;
  if (layout.on_grid())
    run_agreed(world, log, [&] {
      grid = std::make_unique<ProcessGrid>(world, layout.tp, layout.pp,
                                           saved_config(weights_path).derived.backend);
    });
  MpiComm comm = MpiComm::duplicate(grid ? grid->dp().get() : world);
  TrainConfig config;
  std::unique_ptr<EvalSource> data;
  run_agreed(world, log, [&] {
    config = saved_config(weights_path);
    config.train.eval_max_samples = 0;  // the run's cap on periodic evaluations; eval reads all
    config.data.cache_in_memory = cache_in_memory;
  });
  const bool auto_batch = batch <= 0;
  run_agreed(world, log, [&] {
    // Buffers for at most kMaxInferenceBatch samples until the batch is known to fit.
    data = open_eval_source(config, data_spec, comm,
                            auto_batch ? kMaxInferenceBatch : std::min(batch, kMaxInferenceBatch));
    // The same estimate on every rank: available memory is each rank's, so the batch is
    // taken from rank 0's and broadcast below.
    const std::int64_t available = available_memory_bytes();
    if (auto_batch)
      batch = default_inference_batch(config, data->shape(), available);
    else if (!layout.on_grid())  // sharded: the memory plan of the layout, --memory-limit-gb
      check_inference_memory(config, data->shape(), batch, "eval --batch", available);
  });
  TRELLIS_MPI(MPI_Bcast(&batch, 1, MPI_INT64_T, 0, world));
  if (batch > kMaxInferenceBatch)
    run_agreed(world, log, [&] { data = open_eval_source(config, data_spec, comm, batch); });
  if (auto_batch)
    log.info(format_text(
        "eval: batch %lld (the most that fits in %lld MiB of activations, "
        "at most %lld; --batch sets it)",
        static_cast<long long>(batch), static_cast<long long>(kInferenceBudgetBytes >> 20),
        static_cast<long long>(kMaxInferenceBatch)));
  SavedModel saved;
  std::unique_ptr<ShardedModel> sharded;
  std::unique_ptr<PipelineEngine> engine;
  std::string precision = "fp32";
  if (grid) {
    sharded =
        std::make_unique<ShardedModel>(*grid, weights_path, data->shape(), batch, layout, log);
    precision += format_text(", tp %d, pp %d, dp %d, ZeRO-%d", layout.tp, layout.pp,
                             grid->size(Axis::dp), layout.zero);
  } else {
    run_agreed(world, log, [&] {
      // An int8 model (trellis quantize) runs in its int8 form.
      open_saved_model(saved, weights_path, config, data->shape(), batch);
      const std::vector<int8::Int8Layer>& int8 = saved.int8;
      std::vector<std::unique_ptr<nn::Model>> one;
      one.push_back(std::move(saved.model));
      if (!int8.empty()) {
        const bool onednn = kernels::int8_onednn_available();
        precision = format_text("int8 (%zu layers, %s)", int8.size(),
                                onednn ? "oneDNN" : "reference kernel");
      }
      engine = std::make_unique<PipelineEngine>(std::move(one), PipelineSchedule::one_f_one_b,
                                                nullptr, nn::TensorParallel{});
    });
  }
  PipelineEngine& runner = sharded ? sharded->model().engine() : *engine;
  const nn::Model* model = &runner.model();
  BatchBuffers buffers(batch, data->shape().feature_numel, data->shape().seq_len);
  const MpiComm self = MpiComm::borrow(MPI_COMM_SELF);
  TRELLIS_MPI(MPI_Barrier(world));
  const auto start = std::chrono::steady_clock::now();
  const EvalResult result =
      evaluate_model(runner, *data, buffers, batch, comm, grid ? grid->pp() : self);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  char line[768];
  std::snprintf(line, sizeof(line),
                "eval %s on %s (%s, %s): %lld samples, loss %.6f, accuracy %.6f, %.0f samples/s",
                weights_path.c_str(), data_spec.c_str(), model->describe().c_str(),
                precision.c_str(), static_cast<long long>(result.samples), result.loss,
                result.accuracy, static_cast<double>(result.samples) / seconds);
  std::string text = line;
  if (model->takes_tokens()) {
    std::snprintf(line, sizeof(line), ", %.4f bits per token", result.bits_per_target());
    text += line;
  }
  log.info(text + peak_memory(world));
}

}  // namespace

int run_eval_command(const CommandContext& context, const CommandArgs& args) {
  ModelLayout layout;
  layout.tp = static_cast<int>(args.integer("--tp"));
  layout.pp = static_cast<int>(args.integer("--pp"));
  layout.zero = static_cast<int>(args.integer("--zero"));
  layout.memory_limit_gb = args.real("--memory-limit-gb");
  evaluate_weights(context.world, args.text("--weights"), args.text("--data"),
                   args.integer("--batch"), context.log, args.flag("--cache"), layout);
  return 0;
}

}  // namespace trellis
