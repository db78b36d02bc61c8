#include "trellis/train/trainer.hpp"

#include "trellis/comm/mpi_check.hpp"
#include "trellis/core/error.hpp"
#include "trellis/core/timer.hpp"
#include "trellis/data/staging.hpp"
#include "trellis/optim/clip.hpp"
#include "trellis/parallel/grad_norm.hpp"
#include "trellis/parallel/gradient_sync.hpp"
#include "trellis/parallel/logical_tensors.hpp"
#include "trellis/train/agreement.hpp"
#include "trellis/train/data_factory.hpp"
#include "trellis/train/memory_estimate.hpp"
#include "trellis/train/model_factory.hpp"
#include "trellis/train/weights_file.hpp"

#ifdef TRELLIS_ENABLE_CUDA
#include <cuda_runtime.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <thread>

namespace trellis {

namespace {

std::string format(const char* fmt, double a, double b = 0, double c = 0, double d = 0,
                   double e = 0, double f = 0) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), fmt, a, b, c, d, e, f);
  return buf;
}

}  // namespace

namespace {

// Micro-batch k of this rank's part of the global batch, for the pipeline engine. Every rank
// runs the same number of micro-batches, empty ones included (a partial last batch can leave
// a rank fewer samples, or none): layers that synchronise inside forward and backward
// (BatchNorm with model.sync_bn) need every rank in each collective.
class StepBatches : public MicroBatchProvider {
 public:
  StepBatches(const BatchBuffers& buffers, const LocalPart& part, std::int64_t micro,
              std::uint64_t seed, std::int64_t step, bool tokens)
      : buffers_(buffers), part_(part), micro_(micro), seed_(seed), step_(step), tokens_(tokens) {}

  MicroBatch micro_batch(int k) const override {
    const std::int64_t first = std::min(k * micro_, part_.samples);
    const std::int64_t count = std::min(micro_, part_.samples - first);
    MicroBatch mb;
    if (tokens_)
      mb.input.tokens = buffers_.token_rows(first, count);
    else
      mb.input.features = buffers_.feature_rows(first, count);
    mb.targets = buffers_.target_rows(first, count);
    mb.samples = static_cast<int>(count);
    mb.ctx.seed = seed_;
    mb.ctx.step = step_;
    mb.ctx.first_sample = part_.first_position + first;
    mb.ctx.training = true;
    return mb;
  }

 private:
  const BatchBuffers& buffers_;
  const LocalPart& part_;
  std::int64_t micro_;
  std::uint64_t seed_;
  std::int64_t step_;
  bool tokens_;
};

}  // namespace

Trainer::Trainer(TrainConfig config, MPI_Comm world, const NodeBinding& node, const Logger& log)
    : config_(std::move(config)), node_(node), log_(log) {
  setup(world);
}

void Trainer::setup(MPI_Comm world) {
  run_agreed(world, log_, [&] {
    grid_ = std::make_unique<ProcessGrid>(world, config_.parallel.tp, config_.parallel.pp,
                                          config_.derived.backend);
    config_.resolve_batch(grid_->size(Axis::dp));
  });
  if (grid_->tp_spans_nodes() && grid_->rank() == 0)
    log_.warn("the tensor-parallel group of " + std::to_string(grid_->size(Axis::tp)) +
              " ranks spans nodes: its per-layer all-reduces leave the node (place tp ranks "
              "on one node, e.g. parallel.tp <= GPUs per node with block rank placement)");
  const nn::TensorParallel tp{grid_->size(Axis::tp) > 1 ? &grid_->communicator(Axis::tp) : nullptr};
  const MpiComm& dp = grid_->dp();
  const int dp_size = dp.size();

  // Input on node-local storage first, if asked: then every later read is local.
  if (!config_.data.stage.empty())
    run_agreed(grid_->world().get(), log_, [&] {
      const std::string dir = config_.data.stage;
      config_.data.train = stage_to_node_local(config_.data.train, dir, grid_->world().get());
      if (!config_.data.test.empty())
        config_.data.test = stage_to_node_local(config_.data.test, dir, grid_->world().get());
      log_.info("data staged into " + expand_tmpdir(dir) + ": train " + config_.data.train +
                (config_.data.test.empty() ? "" : ", test " + config_.data.test));
    });
  // Files next: every rank opens every shard (collective), so all agree on success.
  run_agreed(grid_->world().get(), log_, [&] { train_data_ = open_train_source(config_, dp); });
  const DataShape shape = train_data_->shape();
  run_agreed(grid_->world().get(), log_, [&] {
    // Resolved from the data; config.ini and model.h5 record it.
    if (config_.model.type == ModelType::gpt) config_.resolve_vocab(shape.classes);
    check_memory_estimate(config_, shape, dp_size, grid_->size(Axis::tp), available_memory_bytes());
  });
  run_agreed(grid_->world().get(), log_, [&] {
    if (config_.data.test.empty()) return;
    test_data_ = open_eval_source(config_, config_.data.test, dp, config_.train.eval_batch);
    const DataShape test_shape = test_data_->shape();
    if (test_shape.feature_numel != shape.feature_numel || test_shape.classes != shape.classes)
      throw InputError(config_.data.test + ": " + test_data_->describe() +
                       ", but the training set has " + train_data_->describe());
  });

  const std::int64_t local_batch = config_.local_batch(dp_size);
  const std::int64_t eval_rows = test_data_ ? config_.train.eval_batch : 0;
  const std::int64_t capacity = std::max(config_.micro_batch(), eval_rows);
  run_agreed(grid_->world().get(), log_, [&] {
    // Pipeline: this stage's units, and one copy of its layers per micro-batch in flight.
    const int pp = grid_->size(Axis::pp), stage = grid_->coords().pp;
    const int micro_batches = static_cast<int>(config_.accumulation_steps(dp_size));
    nn::StageRange range;
    if (pp > 1) {
      const std::vector<int> bounds =
          stage_boundaries(config_.parallel.stages, model_unit_costs(config_.model, shape), pp);
      range.first_unit = bounds[static_cast<std::size_t>(stage)];
      range.end_unit = bounds[static_cast<std::size_t>(stage) + 1];
    }
    // One stage: the plain micro-batch loop, which is 1F1B's order with one slot.
    const PipelineSchedule schedule =
        pp > 1 ? config_.parallel.schedule : PipelineSchedule::one_f_one_b;
    const int slots = in_flight(schedule, pp, stage, micro_batches);
    std::vector<std::unique_ptr<nn::Model>> replicas;
    const std::size_t first_offset = store_.registration_cursor();
    replicas.push_back(build_model(config_.model, shape, capacity, store_, &dp, tp, range));
    for (int k = 1; k < slots; ++k) {
      store_.begin_replica(first_offset);
      replicas.push_back(build_model(config_.model, shape, capacity, store_, &dp, tp, range));
      store_.end_replica();
    }
    model_ = replicas.front().get();
    tied_ = model_->tied_parameters();
    store_.pad_to_multiple(GradientSync::padding_multiple(dp_size));  // even ZeRO-1 shards
    store_.finalize(config_.train.seed);
    GradientSyncOptions sync_options;
    sync_options.bucket_bytes = static_cast<std::size_t>(config_.parallel.bucket_mb * 1024 * 1024);
    sync_options.overlap = config_.parallel.overlap;
    sync_options.zero1 = config_.parallel.zero;
    sync_ = std::make_unique<GradientSync>(grid_->communicator(Axis::dp), store_, sync_options);
    for (const std::string& name : tied_) {  // summed over the two stages before the dp sync
      const nn::ParamInfo& info = store_.info(store_.index(name));
      sync_->hold_back(info.offset + info.numel);
    }
    const bool vocab_parallel = model_->local_classes() < model_->classes();
    engine_ = std::make_unique<PipelineEngine>(std::move(replicas), schedule,
                                               pp > 1 ? &grid_->communicator(Axis::pp) : nullptr,
                                               vocab_parallel ? tp : nn::TensorParallel{});
    // The last stage's copy of a tied parameter: the first stage counts it in the norm.
    const std::vector<std::string> copies =
        model_->first_stage() ? std::vector<std::string>{} : tied_;
    norm_mask_ = sync_->gather_shard(norm_mask(store_, grid_->coords().tp, copies));
    optimizer_ = make_optimizer(config_.optimizer_spec(), sync_->update_size(),
                                sync_->gather_shard(store_.decay_mask()));
    schedule_ = std::make_unique<LrSchedule>(config_.schedule_spec(total_steps()));
  });
  if (!schedule_->warning().empty() && grid_->rank() == 0) log_.warn(schedule_->warning());
  buffers_ = std::make_unique<BatchBuffers>(std::max(local_batch, eval_rows), shape.feature_numel,
                                            shape.seq_len);

  measure_model_and_peak();
  progress_bar_ = want_progress_bar(config_.monitor.progress.c_str(), grid_->rank());
  progress_ = std::make_unique<ProgressBar>(progress_bar_);
  gpu_ = std::make_unique<GpuTelemetry>(node_.device);
#ifdef TRELLIS_ENABLE_CUDA
  if (!gpu_->available() && grid_->rank() == 0)
    log_.warn("GPU telemetry unavailable: " + gpu_->unavailable_reason());
#endif
  stop_ = std::make_unique<StopControl>(config_.train.time_limit_s, config_.ckpt.margin_s);
  watchdog_ = std::make_unique<Watchdog>(config_.fault.timeout_s, grid_->rank());
  // Before anything in run.dir is rewritten: a checkpoint that cannot be used stops the run
  // with the files of the previous run intact.
  const bool resumed = resume_if_asked();
  const bool writer = grid_->rank() == 0;
  run_agreed(grid_->world().get(), log_, [&] {
    if (!writer) return;
    std::filesystem::create_directories(config_.run_dir);
    std::ofstream out(config_.run_dir + "/config.ini");
    out << config_.to_ini();
    if (!out) throw Error("cannot write " + config_.run_dir + "/config.ini");
  });
  metrics_ = std::make_unique<MetricsLog>(config_.run_dir + "/metrics.jsonl", writer,
                                          resumed ? global_step_ : -1);
  tensorboard_ = std::make_unique<TensorBoardWriter>(config_.run_dir, writer);
  tensorboard_->add_text("config", "```\n" + config_.to_ini() + "```", global_step_);
  tensorboard_->flush();

  log_.info("trellis " + std::string(TRELLIS_VERSION) + ": " +
            std::to_string(grid_->layout().world_size()) + " ranks on " +
            std::to_string(node_.node_count) + " node(s), grid " + grid_->layout().describe());
  log_.info("data: train " + train_data_->describe() +
            (test_data_ ? "; test " + test_data_->describe() : ""));
  parameter_count_ = logical_parameter_count();  // collective over pp
  log_.info("model: " + model_->describe() + ", " + std::to_string(parameter_count_) +
            " parameters (" + std::to_string(store_.num_elements()) + " on this rank); optimizer " +
            optimizer_->name() + ", schedule " + config_.sched.type);
  if (grid_->size(Axis::pp) > 1)
    log_.info(
        format("pipeline: %.0f stages, schedule ", grid_->size(Axis::pp)) +
        pipeline_schedule_name(config_.parallel.schedule) +
        format(", %.0f micro-batches per step, bubble %.1f%% of a balanced step; stage 0: ",
               static_cast<double>(config_.accumulation_steps(dp_size)),
               100.0 * bubble_fraction(grid_->size(Axis::pp),
                                       static_cast<int>(config_.accumulation_steps(dp_size)))) +
        model_->describe() + format(", %.0f slot(s)", engine_->slots()));
  log_.info("batch: global " + std::to_string(config_.train.global_batch) + " = " +
            std::to_string(dp_size) + " ranks x " +
            std::to_string(config_.accumulation_steps(dp_size)) + " micro-batches x " +
            std::to_string(config_.micro_batch()) + " samples; " +
            std::to_string(train_data_->steps_per_epoch()) + " steps per epoch; run dir " +
            config_.run_dir);
}

std::int64_t Trainer::logical_parameter_count() const {
  std::int64_t total = 0;
  for (std::size_t i = 0; i < store_.size(); ++i) {
    const nn::ParamInfo& info = store_.info(i);
    const bool copy =
        !model_->first_stage() && std::find(tied_.begin(), tied_.end(), info.name) != tied_.end();
    if (!copy) total += shape_numel(info.logical_shape);
  }
  // Each pipeline stage holds its own layers.
  TRELLIS_MPI(MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_INT64_T, MPI_SUM, grid_->pp().get()));
  return total;
}

void Trainer::skip_step(StepStats& stats) {
  ++skipped_steps_;
  ++consecutive_skips_;
  const std::string message = std::string("non-finite ") +
                              (std::isfinite(stats.loss_sum) ? "gradients" : "loss") + " at step " +
                              std::to_string(global_step_);
  if (!config_.fault.skip_nonfinite)
    throw Error(message + " (fault.nonfinite = abort; lower optim.lr or set optim.clip_norm)");
  if (consecutive_skips_ > config_.fault.max_skips)
    throw Error(
        message + ": " + std::to_string(consecutive_skips_) +
        " steps in a row, more than fault.max_skips = " + std::to_string(config_.fault.max_skips) +
        " (lower optim.lr or set optim.clip_norm)");
  if (grid_->rank() == 0)
    log_.warn(message + ": step skipped, parameters unchanged (" +
              std::to_string(consecutive_skips_) + " in a row, " + std::to_string(skipped_steps_) +
              " in total)");
  stats.skipped = true;
}

bool Trainer::fault_injected(const char* kind) const {
  return config_.fault.inject_rank == grid_->rank() &&
         config_.fault.inject_step == global_step_ + 1 && config_.fault.inject_kind == kind;
}

void Trainer::inject_fault_if_asked() const {
  if (fault_injected("throw"))
    throw Error("fault.inject: injected failure on rank " + std::to_string(grid_->rank()) +
                " at step " + std::to_string(global_step_ + 1));
  if (fault_injected("signal")) std::raise(SIGUSR1);  // a preemption notice, as from Slurm
  if (fault_injected("hang")) {
    log_.warn("fault.inject: rank " + std::to_string(grid_->rank()) + " hangs at step " +
              std::to_string(global_step_ + 1));
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

std::int64_t Trainer::optimizer_state_floats() const {
  std::int64_t total = 0;
  for (const auto& [name, view] : optimizer_->state())
    total += static_cast<std::int64_t>(view.extent(0));
  return total;
}

std::int64_t Trainer::total_steps() const {
  const std::int64_t epochs_steps = config_.train.epochs * train_data_->steps_per_epoch();
  return config_.train.max_steps > 0 ? std::min(config_.train.max_steps, epochs_steps)
                                     : epochs_steps;
}

Trainer::StepStats Trainer::train_step(std::int64_t epoch, std::int64_t step_in_epoch,
                                       StepTimes& times) {
  const MpiComm& dp = grid_->dp();
  Stopwatch phase;
  const LocalPart part = train_data_->load(epoch, step_in_epoch, global_step_, *buffers_);
  buffers_->upload(part.samples);
  times.data += phase.fenced_seconds();

  inject_fault_if_asked();
  store_.zero_grads();
  const std::int64_t rows_per_sample = model_->rows_per_sample();
  // Mean over the global batch's targets: every rank scales by the same 1/(b x rows per
  // sample), so the dp sum of gradients is the global mean.
  float scale = 1.0f / static_cast<float>(part.global_samples * rows_per_sample);
  if (fault_injected("nan")) scale = std::numeric_limits<float>::quiet_NaN();
  // loss sum, correct predictions, loss terms (targets), samples
  double sums[4] = {0.0, 0.0, static_cast<double>(part.samples * rows_per_sample),
                    static_cast<double>(part.samples)};
  // Every rank runs the same number of micro-batches, empty ones included (a partial last
  // batch can leave a rank fewer samples, or none): layers that synchronise inside forward
  // and backward (BatchNorm with model.sync_bn) need every rank in each collective.
  const StepBatches batches(*buffers_, part, config_.micro_batch(), config_.train.seed,
                            global_step_, model_->takes_tokens());
  StageTimes stage_times;
  const double tp_blocked_before = grid_->communicator(Axis::tp).blocked_seconds();
  const StageSums stage_sums = engine_->train(
      batches, static_cast<int>(config_.accumulation_steps(dp.size())), scale, *sync_, stage_times);
  sums[0] = stage_sums.loss_sum;  // from the last stage; 0 on the others
  sums[1] = stage_sums.correct;
  // The tp all-reduces run inside the layers, so inside the engine's compute time: move them.
  const double tp_comm = grid_->communicator(Axis::tp).blocked_seconds() - tp_blocked_before;
  times.compute += stage_times.compute - tp_comm;
  times.tp_comm += tp_comm;
  times.pipeline += stage_times.p2p;

  // Exposed communication: what the overlap with backward did not hide.
  phase.restart();
  for (const std::string& name : tied_) {  // the GPT's token table, on the first and last stage
    const kernels::Vector grad = store_.grad_vector(store_.index(name));
    grid_->embedding_group()->all_reduce(grad.data(), grad.extent(0), ReduceOp::sum);
  }
  sync_->finish_reduction();
  TRELLIS_MPI(MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, grid_->pp().get()));
  TRELLIS_MPI(MPI_Allreduce(MPI_IN_PLACE, sums, 4, MPI_DOUBLE, MPI_SUM, dp.get()));
  times.comm += phase.seconds();

  phase.restart();
  StepStats stats;
  stats.loss_sum = sums[0];
  stats.correct = sums[1];
  stats.targets = sums[2];
  stats.samples = sums[3];
  // The global norm: each rank's masked share, summed over the tp group and the pipeline
  // stages, and over dp when
  // ZeRO-1 left each dp rank a shard (otherwise the reduced gradients are equal over dp).
  const FloatView grads = sync_->update_grads();
  double sum_of_squares = grad_sum_of_squares(grads, norm_mask_);
  TRELLIS_MPI(
      MPI_Allreduce(MPI_IN_PLACE, &sum_of_squares, 1, MPI_DOUBLE, MPI_SUM, grid_->tp().get()));
  TRELLIS_MPI(
      MPI_Allreduce(MPI_IN_PLACE, &sum_of_squares, 1, MPI_DOUBLE, MPI_SUM, grid_->pp().get()));
  if (sync_->sharded())
    TRELLIS_MPI(MPI_Allreduce(MPI_IN_PLACE, &sum_of_squares, 1, MPI_DOUBLE, MPI_SUM, dp.get()));
  stats.grad_norm = std::sqrt(sum_of_squares);
  ++global_step_;
  // A NaN or infinity anywhere reaches every rank through the reduced loss and the global
  // norm, so all ranks decide alike here, before anything is updated.
  if (!std::isfinite(stats.loss_sum) || !std::isfinite(stats.grad_norm)) {
    skip_step(stats);
    times.optimizer += phase.seconds();
    return stats;
  }
  consecutive_skips_ = 0;
  clip_to_norm(grads, stats.grad_norm, config_.optim.clip_norm);
  optimizer_->step(sync_->update_params(), grads, schedule_->lr(global_step_ - 1));
  times.optimizer += phase.fenced_seconds();
  phase.restart();
  sync_->finish_update();  // ZeRO-1: all-gather the updated shards
  times.comm += phase.seconds();
  return stats;
}

void Trainer::measure_model_and_peak() {
  // The whole model's FLOPs, whatever part of it this rank holds.
  if (config_.model.type == ModelType::mlp) {
    const std::vector<double> macs = model_unit_costs(config_.model, train_data_->shape());
    model_flops_ = 6.0 * std::accumulate(macs.begin(), macs.end(), 0.0);
  } else {
    model_flops_ = static_cast<double>(model_->flops_per_sample());  // gpt: from its spec
  }
  if (config_.monitor.peak_tflops > 0) {
    peak_tflops_ = config_.monitor.peak_tflops;
    peak_source_ = "monitor.peak_tflops";
    return;
  }
#ifdef TRELLIS_ENABLE_CUDA
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, node_.device < 0 ? 0 : node_.device) == cudaSuccess) {
    peak_tflops_ = known_peak_tflops(prop.name, "fp32");
    peak_source_ = std::string(prop.name) + ", fp32 data-sheet peak";
  }
#endif
  if (peak_tflops_ <= 0) {
    // Every rank measures at once, as they will train: ranks sharing cores or memory bandwidth
    // see their share. The slowest rank sets the peak.
    double measured = measure_gemm_tflops();
    TRELLIS_MPI(
        MPI_Allreduce(MPI_IN_PLACE, &measured, 1, MPI_DOUBLE, MPI_MIN, grid_->world().get()));
    peak_tflops_ = measured;
    peak_source_ = "SGEMM 512^3 measured at start-up";
  }
  log_.info(format("model: %.4g GFLOP per sample (forward + backward); peak %.4g TFLOP/s per "
                   "device (",
                   model_flops_ * 1e-9, peak_tflops_) +
            peak_source_ + ")");
}

CostEstimate Trainer::run_cost() const {
  return estimate_cost(run_watch_.seconds(), global_step_ - first_step_,
                       total_steps() - first_step_, grid_->layout().world_size(),
                       config_.monitor.price_per_device_hour,
                       config_.monitor.spot_price_per_device_hour);
}

void Trainer::log_step(std::int64_t epoch, const StepStats& stats, float lr, StepTimes& times) {
  const double loss = stats.loss_sum / stats.targets;
  const double samples_per_sec =
      times.total > 0 ? static_cast<double>(times.samples) / times.total : 0.0;
  const double step_time =
      times.total / static_cast<double>(std::max<std::int64_t>(times.steps, 1));
  const double tflops = model_flops_ * samples_per_sec * 1e-12;
  const double mfu = model_flops_utilisation(model_flops_, samples_per_sec,
                                             grid_->layout().world_size(), peak_tflops_);
  const CostEstimate cost = run_cost();
  const double eta = step_time * static_cast<double>(total_steps() - global_step_);
  JsonLine line_json;
  line_json.add("step", global_step_)
      .add("epoch", epoch + 1)
      .add("loss", loss)
      .add("train_accuracy", stats.correct / stats.targets)
      .add("lr", static_cast<double>(lr))
      .add("grad_norm", stats.grad_norm)
      .add("samples_per_sec", samples_per_sec)
      .add("tokens_per_sec",
           samples_per_sec *
               static_cast<double>(model_->takes_tokens() ? model_->rows_per_sample() : 0))
      .add("step_time_s", step_time)
      .add("data_time_s", times.data / times.steps)
      .add("compute_time_s", times.compute / times.steps)
      .add("comm_time_s", times.comm / times.steps)
      .add("tp_comm_time_s", times.tp_comm / times.steps)
      .add("pipeline_time_s", times.pipeline / times.steps)
      .add("optimizer_time_s", times.optimizer / times.steps)
      .add("checkpoint_time_s", times.checkpoint / times.steps)
      .add("tflops", tflops)
      .add("mfu", mfu)
      .add("host_rss_bytes", resident_bytes())
      .add("skipped_steps", skipped_steps_)
      .add("cost_so_far", cost.on_demand)
      .add("projected_cost", cost.projected_on_demand)
      .add("projected_spot_cost", cost.projected_spot)
      .add("eta_s", eta);
#ifdef TRELLIS_ENABLE_CUDA
  std::size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess)
    line_json.add("device_memory_used_bytes", static_cast<std::int64_t>(total_bytes - free_bytes));
#endif
  // NVML, CUDA builds: this rank's GPU (rank 0 writes the metrics).
  const GpuSample gpu = gpu_->sample();
  if (gpu.valid)
    line_json.add("gpu_utilization_pct", gpu.utilization_pct)
        .add("gpu_memory_used_bytes", gpu.memory_used_bytes)
        .add("gpu_power_w", gpu.power_watts)
        .add("gpu_temperature_c", gpu.temperature_c);
  metrics_->write(line_json);
  // The same numbers for TensorBoard (rank 0; a no-op elsewhere).
  TensorBoardWriter& tb = *tensorboard_;
  tb.add_scalar("train/loss", loss, global_step_);
  tb.add_scalar("train/accuracy", stats.correct / stats.targets, global_step_);
  tb.add_scalar("train/lr", static_cast<double>(lr), global_step_);
  tb.add_scalar("train/grad_norm", stats.grad_norm, global_step_);
  tb.add_scalar("perf/samples_per_sec", samples_per_sec, global_step_);
  tb.add_scalar("perf/tflops", tflops, global_step_);
  tb.add_scalar("perf/mfu", mfu, global_step_);
  tb.add_scalar("time/step_s", step_time, global_step_);
  tb.add_scalar("time/data_s", times.data / times.steps, global_step_);
  tb.add_scalar("time/compute_s", times.compute / times.steps, global_step_);
  tb.add_scalar("time/comm_s", times.comm / times.steps, global_step_);
  tb.add_scalar("time/tp_comm_s", times.tp_comm / times.steps, global_step_);
  tb.add_scalar("time/pipeline_s", times.pipeline / times.steps, global_step_);
  tb.add_scalar("time/optimizer_s", times.optimizer / times.steps, global_step_);
  tb.add_scalar("memory/host_rss_bytes", static_cast<double>(resident_bytes()), global_step_);
  tb.add_scalar("cost/so_far", cost.on_demand, global_step_);
  tb.add_scalar("cost/projected", cost.projected_on_demand, global_step_);
  if (gpu.valid) {
    tb.add_scalar("gpu/utilization_pct", gpu.utilization_pct, global_step_);
    tb.add_scalar("gpu/memory_used_bytes", gpu.memory_used_bytes, global_step_);
    tb.add_scalar("gpu/power_w", gpu.power_watts, global_step_);
    tb.add_scalar("gpu/temperature_c", gpu.temperature_c, global_step_);
  }
  tb.flush();
  std::string line = format("epoch %.0f step %6.0f/%.0f  loss %.4f  lr %.4g  %.0f samples/s",
                            static_cast<double>(epoch + 1), static_cast<double>(global_step_),
                            static_cast<double>(total_steps()), loss, lr, samples_per_sec) +
                     format("  %.3g TFLOP/s  MFU %.1f%%  ETA %.0f s", tflops, 100.0 * mfu, eta);
  if (config_.monitor.price_per_device_hour > 0)
    line += format("  cost %.2f (projected %.2f)", cost.on_demand, cost.projected_on_demand);
  if (!progress_bar_) log_.info(line);
  times = StepTimes{};
}

void Trainer::update_early_stop(const EvalResult& result) {
  const std::string& metric = config_.monitor.early_stop_metric;
  if (metric == "none") return;
  // Lower is better for the loss, higher for the accuracy; every rank sees the same values.
  const double value = metric == "test_loss" ? -result.loss : result.accuracy;
  if (!have_best_ || value > best_metric_ + config_.monitor.min_delta) {
    have_best_ = true;
    best_metric_ = value;
    evals_without_gain_ = 0;
    return;
  }
  if (++evals_without_gain_ >= config_.monitor.patience) {
    early_stop_ = true;
    log_.info("early stop: " + metric + " has not improved by more than " +
              format("%g", config_.monitor.min_delta) + " for " +
              std::to_string(evals_without_gain_) + " evaluations");
  }
}

EvalResult Trainer::evaluate_and_log(std::int64_t epoch) {
  Stopwatch watch;
  const EvalResult result = evaluate_model(*engine_, *test_data_, *buffers_,
                                           config_.train.eval_batch, grid_->dp(), grid_->pp());
  const double seconds = watch.seconds();
  metrics_->write(
      JsonLine()
          .add("step", global_step_)
          .add("epoch", epoch + 1)
          .add("test_loss", result.loss)
          .add("test_accuracy", result.accuracy)
          .add("test_samples", result.samples)
          .add("test_bits_per_token", model_->takes_tokens() ? result.bits_per_target() : 0.0)
          .add("eval_time_s", seconds));
  tensorboard_->add_scalar("eval/loss", result.loss, global_step_);
  tensorboard_->add_scalar("eval/accuracy", result.accuracy, global_step_);
  tensorboard_->flush();
  if (progress_bar_) progress_->clear();
  update_early_stop(result);
  if (model_->takes_tokens())
    log_.info(format(
        "epoch %.0f step %.0f  validation loss %.4f  %.4f bits per token  (%.0f sequences, %.1f s)",
        static_cast<double>(epoch + 1), static_cast<double>(global_step_), result.loss,
        result.bits_per_target(), static_cast<double>(result.samples), seconds));
  else
    log_.info(format("epoch %.0f  test loss %.4f  test accuracy %.2f%%  (%.0f samples, %.1f s)",
                     static_cast<double>(epoch + 1), result.loss, 100.0 * result.accuracy,
                     static_cast<double>(result.samples), seconds));
  return result;
}

ExitCode Trainer::run() {
  try {
    return train_and_save();
  } catch (const AgreedFailure&) {
    throw;  // every rank agreed to stop: unwinding (and the collective cleanup in it) is safe
  } catch (const Error& e) {
    abort_job(e.what(), e.code());
  } catch (const std::exception& e) {
    abort_job(std::string("unexpected exception: ") + e.what(), ExitCode::failure);
  }
}

void Trainer::abort_job(const std::string& message, ExitCode code) const {
  // An error this rank may have seen alone: the other ranks may be waiting in a collective,
  // and unwinding would run collective destructors (MPI-IO file close, communicator frees)
  // that never complete. End the whole job now, with this rank's message.
  log_.error(message);
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, static_cast<int>(code));
  std::abort();  // not reached
}

ExitCode Trainer::train_and_save() {
  const std::int64_t last_step = total_steps();
  StepTimes times;
  StepTimes totals;  // the whole run, for the summary's time breakdown
  run_watch_.restart();
  Stopwatch since_warmup;
  Stopwatch since_checkpoint;
  std::int64_t samples_after_warmup = 0;
  std::int64_t checkpointed_step = global_step_;  // a resumed run starts at its checkpoint
  first_step_ = global_step_;
  StopReason stop = StopReason::none;
  std::string finish_reason = "completed";  // or the budget / early stop that ended the run
  const std::int64_t per_epoch = train_data_->steps_per_epoch();
  auto checkpoint = [&] {
    if (progress_bar_) progress_->clear();
    Stopwatch watch;
    save_checkpoint();
    times.checkpoint += watch.seconds();
    totals.checkpoint += watch.seconds();
    checkpointed_step = global_step_;
    since_checkpoint.restart();
  };
  bool finished_early = false;
  for (std::int64_t epoch = global_step_ / per_epoch;
       epoch < config_.train.epochs && global_step_ < last_step && !finished_early; ++epoch) {
    for (std::int64_t s = global_step_ % per_epoch;
         s < per_epoch && global_step_ < last_step && !finished_early; ++s) {
      Stopwatch step_watch;
      watchdog_->beat("step");
      const float lr = schedule_->lr(global_step_);
      StepTimes step_times;
      const StepStats stats = train_step(epoch, s, step_times);
      const double step_seconds = step_watch.seconds();
      step_times.total = step_seconds;
      step_times.steps = 1;
      step_times.samples = static_cast<std::int64_t>(stats.samples);
      times += step_times;
      totals += step_times;
      if (global_step_ == first_step_ + 1)
        since_warmup.restart();  // the first step pays one-time costs
      else
        samples_after_warmup += static_cast<std::int64_t>(stats.samples);
      if (progress_bar_)
        progress_->update(epoch + 1, global_step_, last_step, stats.loss_sum / stats.targets,
                          static_cast<double>(times.samples) / std::max(times.total, 1e-9),
                          (times.total / static_cast<double>(times.steps)) *
                              static_cast<double>(last_step - global_step_));
      if (global_step_ % config_.log_interval == 0 || global_step_ == last_step)
        log_step(epoch, stats, lr, times);
      if (test_data_ && config_.train.eval_interval > 0 &&
          global_step_ % config_.train.eval_interval == 0 && global_step_ != last_step)
        last_eval_ = evaluate_and_log(epoch);

      // Agreed at every step boundary (each rank's clock differs a little; the MAX makes it
      // one decision): a stop request, a checkpoint due by the clock, a budget used up.
      const CostEstimate cost = run_cost();
      const bool over_budget =
          (config_.monitor.max_cost > 0 && cost.on_demand >= config_.monitor.max_cost) ||
          (config_.monitor.max_hours > 0 &&
           run_watch_.seconds() >= 3600.0 * config_.monitor.max_hours);
      int agree[3] = {static_cast<int>(stop_->local_reason(step_seconds)),
                      config_.ckpt.interval_minutes > 0 &&
                              since_checkpoint.seconds() >= 60.0 * config_.ckpt.interval_minutes
                          ? 1
                          : 0,
                      over_budget ? 1 : 0};
      TRELLIS_MPI(MPI_Allreduce(MPI_IN_PLACE, agree, 3, MPI_INT, MPI_MAX, grid_->world().get()));
      stop = static_cast<StopReason>(agree[0]);
      if (agree[2] != 0) finish_reason = "budget";
      if (early_stop_) finish_reason = "early stop";  // agreed: reduced evaluation results
      finished_early = stop != StopReason::none || finish_reason != "completed";
      const bool due = agree[1] != 0 || (config_.ckpt.interval_steps > 0 &&
                                         global_step_ % config_.ckpt.interval_steps == 0);
      if (due || (finished_early && checkpointed_step != global_step_)) checkpoint();
    }
    const bool epoch_done = global_step_ % per_epoch == 0;
    if (!finished_early && test_data_ && config_.train.eval_every_epoch &&
        (epoch_done || global_step_ == last_step))
      last_eval_ = evaluate_and_log(epoch);
    if (early_stop_ && !finished_early) {  // decided by the epoch-end evaluation
      finish_reason = "early stop";
      finished_early = true;
      if (checkpointed_step != global_step_) checkpoint();
    }
  }
  watchdog_->pause();
  if (progress_bar_) progress_->clear();
  if (stop != StopReason::none) {
    log_.info(format("stopping at step %.0f on a ", static_cast<double>(global_step_)) +
              stop_reason_name(stop) + " with a checkpoint in " + config_.derived.checkpoint_dir +
              "; resubmit with --resume auto to continue (exit code 75)");
    return ExitCode::stopped_resumable;
  }
  // A run that checkpoints also ends with one, so it can be continued for more steps.
  if ((config_.ckpt.interval_steps > 0 || config_.ckpt.interval_minutes > 0) &&
      checkpointed_step != global_step_)
    checkpoint();
  const double seconds = run_watch_.seconds();
  const double throughput = samples_after_warmup / std::max(since_warmup.seconds(), 1e-9);
  if (finish_reason != "completed")
    log_.info(format("stopped at step %.0f: ", static_cast<double>(global_step_)) + finish_reason +
              " (checkpoint written)");
  write_results(seconds, throughput, totals, finish_reason);
  return ExitCode::ok;
}

void Trainer::write_results(double seconds, double throughput, const StepTimes& totals,
                            const std::string& finish_reason) {
  // Every tp group gathers its logical tensors (collective); world rank 0 writes them.
  std::vector<HostTensor> weights;
  run_agreed(grid_->world().get(), log_, [&] {
    weights = logical_parameters(store_, grid_->communicator(Axis::tp));
    // The first stage holds the tied table; the last stage's copy is not sent.
    weights = gather_stages(std::move(weights), grid_->pp(),
                            model_->first_stage() ? std::vector<std::string>{} : tied_);
  });
  const int devices = grid_->layout().world_size();
  const double tflops = model_flops_ * throughput * 1e-12;
  const double mfu = model_flops_utilisation(model_flops_, throughput, devices, peak_tflops_);
  // The run's wall time as reported (not a later clock reading), so the figures agree.
  const CostEstimate cost =
      estimate_cost(seconds, 1, 1, devices, config_.monitor.price_per_device_hour,
                    config_.monitor.spot_price_per_device_hour);
  const double steps = static_cast<double>(std::max<std::int64_t>(totals.steps, 1));
  run_agreed(grid_->world().get(), log_, [&] {
    if (grid_->rank() != 0) return;
    save_weights(config_.run_dir + "/model.h5", weights, model_->buffers(), config_.to_ini());
    JsonLine summary;
    summary.add("steps", global_step_)
        .add("finish", finish_reason)
        .add("ranks", devices)
        .add("wall_time_s", seconds)
        .add("samples_per_sec", throughput)
        .add("tokens_per_sec",
             model_->takes_tokens() ? throughput * model_->rows_per_sample() : 0.0)
        .add("parameters", parameter_count_)
        .add("pipeline_bubble_fraction",
             bubble_fraction(grid_->size(Axis::pp),
                             static_cast<int>(config_.accumulation_steps(grid_->size(Axis::dp)))))
        .add("parameters_per_rank", store_.num_elements())
        .add("optimizer_state_floats_per_rank", optimizer_state_floats())
        .add("flops_per_sample", model_flops_)
        .add("tflops", tflops)
        .add("peak_tflops_per_device", peak_tflops_)
        .add("peak_source", peak_source_)
        .add("mfu", mfu)
        .add("step_time_s", totals.total / steps)
        .add("data_time_s", totals.data / steps)
        .add("compute_time_s", totals.compute / steps)
        .add("comm_time_s", totals.comm / steps)
        .add("tp_comm_time_s", totals.tp_comm / steps)
        .add("pipeline_time_s", totals.pipeline / steps)
        .add("optimizer_time_s", totals.optimizer / steps)
        .add("checkpoint_time_s", totals.checkpoint / steps)
        .add("skipped_steps", skipped_steps_)
        .add("host_rss_bytes", resident_bytes())
        .add("device_hours", cost.device_hours)
        .add("cost_on_demand", cost.on_demand)
        .add("cost_spot", cost.spot);
    if (last_eval_)
      summary.add("test_loss", last_eval_->loss).add("test_accuracy", last_eval_->accuracy);
    std::ofstream out(config_.run_dir + "/summary.json");
    out << summary.str() << "\n";
    if (!out) throw Error("cannot write " + config_.run_dir + "/summary.json");
  });
  log_.info(format("done: %.0f steps in %.1f s, %.0f samples/s after the first step, "
                   "%.3g TFLOP/s, MFU %.1f%% of %.3g TFLOP/s per device (",
                   static_cast<double>(global_step_), seconds, throughput, tflops, 100.0 * mfu,
                   peak_tflops_) +
            peak_source_ + ")");
  log_.info(format("time per step: data %.1f ms, compute %.1f ms, exposed comm %.1f ms, "
                   "pipeline %.1f ms, optimizer %.1f ms",
                   1e3 * totals.data / steps, 1e3 * totals.compute / steps,
                   1e3 * totals.comm / steps, 1e3 * totals.pipeline / steps,
                   1e3 * totals.optimizer / steps) +
            format(", tp collectives %.1f ms (+ %.1f ms of checkpoints)",
                   1e3 * totals.tp_comm / steps, 1e3 * totals.checkpoint / steps));
  log_.info(
      format("cost: %.4g device-hours = %.4g on demand, %.4g spot (cost.* prices per "
             "device-hour %.4g / %.4g)",
             cost.device_hours, cost.on_demand, cost.spot, config_.monitor.price_per_device_hour,
             config_.monitor.spot_price_per_device_hour));
  log_.info("weights: " + config_.run_dir + "/model.h5");
}

}  // namespace trellis
