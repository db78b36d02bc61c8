#include "trellis/train/loop/trainer.hpp"

#include "trellis/comm/agreement.hpp"
#include "trellis/comm/error_policy.hpp"
#include "trellis/comm/mpi_check.hpp"
#include "trellis/core/format.hpp"
#include "trellis/core/trace.hpp"
#include "trellis/data/staging.hpp"
#include "trellis/parallel/pipeline_schedule.hpp"
#include "trellis/train/config/memory_estimate.hpp"
#include "trellis/train/faults/peer_heartbeats.hpp"
#include "trellis/train/files/run_directory.hpp"
#include "trellis/train/input/data_factory.hpp"
#include "trellis/train/model/model_registry.hpp"
#include "trellis/train/monitoring/console_sink.hpp"
#include "trellis/train/monitoring/jsonl_sink.hpp"
#include "trellis/train/monitoring/progress.hpp"
#include "trellis/train/monitoring/tensorboard_sink.hpp"
#include "trellis/train/monitoring/trace_writer.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace trellis {

Trainer::Trainer(TrainConfig config, MPI_Comm world, const NodeBinding& node, const Logger& log,
                 bool dry_run)
    : config_(std::move(config)), node_(node), log_(log), dry_run_(dry_run) {
  make_grid(world);
  claim_run_directory();
  open_data();
  // A positive train.max_steps is the run's length, the data repeating as needed (as Hugging
  // Face's Trainer); otherwise train.epochs passes over the training set.
  total_steps_ = config_.train.max_steps > 0
                     ? config_.train.max_steps
                     : config_.train.epochs * train_data_->steps_per_epoch();
  build_parts();
  // Before anything in run.dir is rewritten: a checkpoint that cannot be used stops the run
  // with the files of the previous run intact.
  std::optional<ResumePoint> resumed;
  if (!dry_run_) {
    ReadingPaused paused(*train_data_);
    resumed = checkpoints_->resume_or_start();
  }
  if (resumed) {
    runner_->restore(resumed->step, resumed->skipped_steps);
    checkpointed_step_ = resumed->step;
    keep_or_stretch_schedule(*resumed);
  }
  if (!dry_run_) open_outputs(resumed.has_value());
  parameter_count_ = model_->logical_parameter_count(*grid_);  // collective over tp and pp
  log_setup();
}

void Trainer::make_grid(MPI_Comm world) {
  run_agreed(world, log_, [&] {
    grid_ = std::make_unique<ProcessGrid>(world, config_.parallel.tp, config_.parallel.pp,
                                          config_.derived.backend);
    config_.resolve_batch(grid_->size(Axis::dp));
  });
  if (grid_->tp_spans_nodes() && grid_->rank() == 0)
    log_.warn("the tensor-parallel group of " + std::to_string(grid_->size(Axis::tp)) +
              " ranks spans nodes: its per-layer all-reduces leave the node (place tp ranks "
              "on one node, e.g. parallel.tp <= GPUs per node with block rank placement)");
}

void Trainer::claim_run_directory() {
  run_agreed(grid_->world().get(), log_, [&] {
    if (grid_->rank() != 0) return;
    prepare_run_directory(config_, log_, dry_run_);
  });
}

// The model and the parts that act on it each step.
void Trainer::build_parts() {
  const MPI_Comm all = grid_->world().get();
  const DataShape shape = train_data_->shape();
  const int dp = grid_->size(Axis::dp);
  const std::int64_t eval_rows = test_data_ ? config_.train.eval_batch : 0;
  // The model holds activations for one micro-batch; evaluation reads eval_batch samples at
  // a time and runs them in pieces of that size (evaluate_model). A capacity of eval_batch
  // (1000 by default) held the small CNN's activations and gradients for 1000 images: 1.3 GB.
  const std::int64_t capacity = config_.micro_batch();
  run_agreed(all, log_, [&] {
    model_ = std::make_unique<TrainingModel>(config_, shape, *grid_, capacity, total_steps_);
  });
  if (!model_->schedule().warning().empty() && grid_->rank() == 0)
    log_.warn(model_->schedule().warning());
  buffers_ = std::make_unique<BatchBuffers>(std::max(config_.local_batch(dp), eval_rows),
                                            shape.feature_numel, shape.seq_len);
  // From here on the training data may be read on a loader thread: every HDF5 use of the main
  // thread below pauses it (ReadingPaused), since HDF5 is not thread-safe.
  train_data_ =
      with_prefetch(std::move(train_data_), config_, config_.local_batch(dp), total_steps_);
  faults_ = std::make_unique<FaultInjector>(config_.fault, grid_->rank(), log_);
  run_agreed(all, log_, [&] {
    pruner_ = std::make_unique<Pruner>(config_.prune, total_steps_, *grid_, *model_);
  });
  runner_ = std::make_unique<StepRunner>(config_, *grid_, *model_, *train_data_, *buffers_,
                                         *faults_, *pruner_, log_);
  checkpoints_ =
      std::make_unique<CheckpointManager>(config_, *grid_, *model_, *faults_, *pruner_, log_);
  performance_ = std::make_unique<PerformanceModel>(
      config_, shape, model_->model(), grid_->layout().world_size(), node_.device, all);
  log_.info(format_text("model: %.4g GFLOP per sample (forward + backward); peak %.4g TFLOP/s per "
                        "device (",
                        performance_->flops_per_sample() * 1e-9, performance_->peak_tflops()) +
            performance_->peak_source() + ")");
  stop_policy_ = std::make_unique<StopPolicy>(config_, all);
  early_stopping_ = std::make_unique<EarlyStopping>(config_.early_stop);
  watchdog_ = std::make_unique<Watchdog>(config_.fault.timeout_s, grid_->rank());
}

// config.ini, the metrics and their sinks (rank 0 writes), the heartbeats of the watchdog.
void Trainer::open_outputs(bool resumed) {
  const MPI_Comm all = grid_->world().get();
  const bool writer = grid_->rank() == 0;
  const std::int64_t tokens =
      model_->model().takes_tokens() ? model_->model().rows_per_sample() : 0;
  metrics_ = std::make_unique<Metrics>(*performance_, config_.log.interval, step(), total_steps_,
                                       tokens, node_.device);
  run_agreed(all, log_, [&] {
    if (!writer) return;
    std::filesystem::create_directories(config_.run_dir);
    std::ofstream out(config_.run_dir + "/config.ini");
    out << config_.to_ini();
    if (!out) throw Error("cannot write " + config_.run_dir + "/config.ini");
    metrics_->add_sink(std::make_unique<JsonlSink>(config_.run_dir, resumed ? step() : -1));
    metrics_->add_sink(std::make_unique<TensorBoardSink>(config_.run_dir, resumed, config_.to_ini(),
                                                         step(), log_));
    metrics_->add_sink(std::make_unique<ConsoleSink>(
        log_, want_progress_bar(config_.log.progress.c_str(), grid_->rank())));
  });
  if (config_.fault.timeout_s > 0)
    run_agreed(all, log_, [&] {  // every rank creates the directory: no wait for rank 0's
      const std::string dir = config_.run_dir + "/heartbeats";
      std::filesystem::create_directories(dir);
      watchdog_->attach(std::make_unique<PeerHeartbeats>(
          dir, grid_->rank(), grid_->layout().world_size(), node_.hostname));
    });
#ifdef TRELLIS_ENABLE_CUDA
  if (!metrics_->gpu().available() && writer)
    log_.warn("GPU telemetry unavailable: " + metrics_->gpu().unavailable_reason());
#endif
}

Trainer::~Trainer() {
  runner_.reset();  // holds a reference to train_data_
  train_data_.reset();
}

void Trainer::open_data() {
  const MPI_Comm all = grid_->world().get();
  const MpiComm& dp = grid_->dp();
  // Input on node-local storage first, if asked: then every later read is local.
  if (!config_.data.stage.empty())
    run_agreed(all, log_, [&] {
      const std::string& dir = config_.data.stage;
      StagingReport train, test;
      config_.data.train = stage_to_node_local(config_.data.train, dir, all, &train);
      if (!config_.data.test.empty())
        config_.data.test = stage_to_node_local(config_.data.test, dir, all, &test);
      log_.info("data staged into " + expand_tmpdir(dir) + " on " + std::to_string(train.nodes) +
                " node(s), files copied " + std::to_string(train.copied + test.copied) +
                ", reused " + std::to_string(train.reused + test.reused) + ": train " +
                config_.data.train +
                (config_.data.test.empty() ? "" : ", test " + config_.data.test));
    });
  // Every rank opens every shard (collective), so all agree on success.
  run_agreed(all, log_, [&] { train_data_ = open_train_source(config_, dp); });
  const DataShape shape = train_data_->shape();
  run_agreed(all, log_, [&] {
    // Resolved from the data; config.ini and model.h5 record it.
    if (model_registration(config_.model.type).data == DataKind::tokens)
      config_.resolve_vocab(shape.classes);
    check_memory_estimate(config_, shape, grid_->size(Axis::dp), grid_->size(Axis::tp),
                          available_memory_bytes());
    memory_plan_ = plan_run_memory(config_, shape, *grid_, log_);
  });
  run_agreed(all, log_, [&] {
    if (config_.data.test.empty()) return;
    test_data_ = open_eval_source(config_, config_.data.test, dp, config_.train.eval_batch);
    const DataShape test_shape = test_data_->shape();
    if (test_shape.feature_numel != shape.feature_numel || test_shape.classes != shape.classes)
      throw InputError(config_.data.test + ": " + test_data_->describe() +
                       ", but the training set has " + train_data_->describe());
  });
}

void Trainer::log_setup() const {
  const nn::Model& model = model_->model();
  const int dp = grid_->size(Axis::dp), pp = grid_->size(Axis::pp);
  const auto micro_batches = config_.accumulation_steps(dp);
  log_.info("trellis " + std::string(TRELLIS_VERSION) + ": " +
            std::to_string(grid_->layout().world_size()) + " ranks on " +
            std::to_string(node_.node_count) + " node(s), grid " + grid_->layout().describe());
  log_.info("data: train " + train_data_->describe() +
            (test_data_ ? "; test " + test_data_->describe() : ""));
  log_.info("model: " + model.describe() + ", " + std::to_string(parameter_count_) +
            " parameters (" + std::to_string(model_->store().num_elements()) +
            " on this rank); optimizer " + model_->optimizer().name() + ", schedule " +
            schedule_type_name(config_.sched.type));
  log_.info("gradient exchange: " + model_->describe_exchange(config_));
  if (!model_->precision_notice().empty()) log_.info(model_->precision_notice());
  if (model_->loss_scaler().enabled())
    log_.info(format_text("loss scaling: %s, scale %g",
                          model_->loss_scaler().dynamic() ? "dynamic" : "static",
                          static_cast<double>(model_->loss_scaler().scale())));
  if (pp > 1)
    log_.info(
        format_text("pipeline: %d stages, schedule ", pp) +
        pipeline_schedule_name(config_.parallel.schedule) +
        format_text(", %.0f micro-batches per step, bubble %.1f%% of a balanced step; stage 0: ",
                    static_cast<double>(micro_batches),
                    100.0 * bubble_fraction(pp, static_cast<int>(micro_batches))) +
        model.describe() + format_text(", %d slot(s)", model_->engine().slots()));
  log_.info("batch: global " + std::to_string(config_.train.global_batch) + " = " +
            std::to_string(dp) + " ranks x " + std::to_string(micro_batches) + " micro-batches x " +
            std::to_string(config_.micro_batch()) + " samples; " +
            std::to_string(train_data_->steps_per_epoch()) + " steps per epoch; run dir " +
            config_.run_dir);
  log_.info(run_length());
}

void Trainer::keep_or_stretch_schedule(const ResumePoint& point) {
  const TrainConfig& stored = point.stored;
  const std::int64_t per_epoch = train_data_->steps_per_epoch();
  const std::int64_t started = point.schedule_steps > 0     ? point.schedule_steps
                               : stored.train.max_steps > 0 ? stored.train.max_steps
                                                            : stored.train.epochs * per_epoch;
  if (started == total_steps_ || grid_ == nullptr) return;
  const std::string change = format_text(
      "resume: the run started %lld steps long, now %lld: ", static_cast<long long>(started),
      static_cast<long long>(total_steps_));
  if (config_.stretch_schedule_on_resume) {
    if (grid_->rank() == 0)
      log_.warn(change + "the learning-rate schedule is stretched over " +
                std::to_string(total_steps_) +
                " steps (sched.stretch_on_resume), so lr jumps "
                "to where the longer schedule stands");
    return;
  }
  model_->set_schedule_length(config_, started);
  if (grid_->rank() == 0)
    log_.warn(change + "the learning-rate schedule keeps its length of " + std::to_string(started) +
              " steps" +
              (total_steps_ > started
                   ? " (lr holds its final value after step " + std::to_string(started) + ")"
                   : std::string()) +
              "; sched.stretch_on_resume=true stretches it over the new length instead");
}

std::string Trainer::run_length() const {
  const std::int64_t per_epoch = train_data_->steps_per_epoch();
  if (config_.train.max_steps > 0)
    return format_text(
        "length: %lld steps (train.max_steps, which overrides train.epochs): "
        "%.3g epochs of %lld steps",
        static_cast<long long>(total_steps_),
        static_cast<double>(total_steps_) / static_cast<double>(per_epoch),
        static_cast<long long>(per_epoch));
  return format_text("length: %lld steps (train.epochs = %lld x %lld steps per epoch)",
                     static_cast<long long>(total_steps_),
                     static_cast<long long>(config_.train.epochs),
                     static_cast<long long>(per_epoch));
}

ExitCode Trainer::run() {
  if (dry_run_) {
    log_.info(
        "dry run: the configuration, the data, the process grid, the model and its "
        "memory estimate check out; nothing was trained or written");
    return ExitCode::ok;
  }
  return run_or_abort(grid_->world().get(), log_, [&] { return train(); });
}

void Trainer::report_sparsity() {
  SparsityReport report;
  report.step = step();
  report.target = pruner_->schedule().target(step());
  report.layers = pruner_->sparsity();  // collective over tp
  long long sums[2] = {0, 0};           // pruned, elements: this stage's, then the model's
  for (const LayerSparsity& layer : report.layers)
    sums[0] += layer.pruned, sums[1] += layer.elements;
  TRELLIS_MPI(MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_LONG_LONG, MPI_SUM, grid_->pp().get()));
  report.sparsity = sums[1] > 0 ? static_cast<double>(sums[0]) / static_cast<double>(sums[1]) : 0;
  metrics_->sparsity(report);
}

void Trainer::checkpoint() {
  const trace::Span span("io", "checkpoint");
  watchdog_->beat("checkpoint", step());
  metrics_->before_message();
  Stopwatch watch;
  ReadingPaused paused(*train_data_);
  const std::string dir = checkpoints_->save(step(), runner_->skipped());
  metrics_->checkpoint({step(), dir, watch.seconds()});
  checkpointed_step_ = step();
  stop_policy_->checkpoint_written();
  watchdog_->beat("step");
}

EvalResult Trainer::evaluate(std::int64_t epoch) {
  const trace::Span span("eval", "evaluation");
  Stopwatch watch;
  ReadingPaused paused(*train_data_);
  const EvalResult result = evaluate_model(model_->engine(), *test_data_, *buffers_,
                                           config_.train.eval_batch, grid_->dp(), grid_->pp());
  metrics_->evaluation(
      {step(), epoch + 1, result, watch.seconds(), model_->model().takes_tokens()});
  last_eval_ = result;
  return result;
}

ExitCode Trainer::train() {
  const std::int64_t per_epoch = train_data_->steps_per_epoch();
  const bool periodic_checkpoints =
      config_.ckpt.interval_steps > 0 || config_.ckpt.interval_minutes > 0;
  StepDecision decision;
  std::string finish_reason = "completed";  // or the budget / early stop that ended the run
  auto finished_early = [&] {
    return decision.stop != StopReason::none || finish_reason != "completed";
  };
  TraceWindow trace(config_.monitor, *grid_, step());
  for (std::int64_t epoch = step() / per_epoch; step() < total_steps_ && !finished_early();
       ++epoch) {
    for (std::int64_t s = step() % per_epoch;
         s < per_epoch && step() < total_steps_ && !finished_early(); ++s) {
      trace.before_step(step() + 1);
      watchdog_->beat("step", step());
      const StepRecord record = runner_->run(epoch, s);
      metrics_->step(record, runner_->skipped());
      if (record.masks_changed) report_sparsity();
      if (test_data_ && config_.train.eval_interval > 0 &&
          step() % config_.train.eval_interval == 0 && step() != total_steps_ &&
          early_stopping_->update(evaluate(epoch), log_))
        finish_reason = "early stop";  // agreed: the evaluation results are reduced
      decision = stop_policy_->decide(record.times.total, metrics_->cost_so_far().on_demand);
      if (decision.budget_spent && finish_reason == "completed") finish_reason = "budget";
      const bool due = decision.checkpoint_by_clock || (config_.ckpt.interval_steps > 0 &&
                                                        step() % config_.ckpt.interval_steps == 0);
      if (due || (finished_early() && checkpointed_step_ != step())) checkpoint();
    }
    const bool epoch_done = step() % per_epoch == 0;
    if (!finished_early() && test_data_ && config_.train.eval_every_epoch &&
        (epoch_done || step() == total_steps_) && early_stopping_->update(evaluate(epoch), log_)) {
      finish_reason = "early stop";  // decided by the epoch-end evaluation
      if (checkpointed_step_ != step()) checkpoint();
    }
  }
  trace.finish();
  watchdog_->pause();
  metrics_->before_message();
  if (decision.stop != StopReason::none) {
    // summary.json says how the run stopped; no model.h5 until it finishes.
    finish(std::string("stopped on a ") + stop_reason_name(decision.stop), false);
    log_.info(format_text("stopping at step %.0f on a ", static_cast<double>(step())) +
              stop_reason_name(decision.stop) + " with a checkpoint in " +
              config_.derived.checkpoint_dir +
              "; resubmit with --resume auto to continue (exit code 75)");
    return ExitCode::stopped_resumable;
  }
  // A run that checkpoints also ends with one, so it can be continued for more steps.
  if (periodic_checkpoints && checkpointed_step_ != step()) checkpoint();
  if (finish_reason != "completed")
    log_.info(format_text("stopped at step %.0f: ", static_cast<double>(step())) + finish_reason +
              " (checkpoint written)");
  finish(finish_reason);
  return ExitCode::ok;
}

void Trainer::finish(const std::string& finish_reason, bool write_weights) {
  RunSummary summary;
  if (write_weights) {
    ReadingPaused paused(*train_data_);
    summary.weights_path = checkpoints_->write_weights();
  }
  summary.steps = step(), summary.finish = finish_reason;
  summary.parameters = parameter_count_;
  summary.parameters_per_rank = model_->store().num_elements();
  summary.optimizer_state_floats_per_rank = model_->optimizer_state_floats();
  summary.pipeline_bubble_fraction = bubble_fraction(
      grid_->size(Axis::pp), static_cast<int>(config_.accumulation_steps(grid_->size(Axis::dp))));
  summary.skipped_steps = runner_->skipped();
  summary.collectives_per_step = runner_->last_collectives();
  const nn::Autocast& autocast = model_->store().autocast();
  summary.precision = precision_name(autocast.mode);
  if (autocast.active())
    summary.precision += autocast.native ? " (native kernels)" : " (emulated kernels)";
  summary.overflow_steps = model_->loss_scaler().state().overflows;
  summary.loss_scale = model_->loss_scaler().scale();
  summary.last_eval = last_eval_;
  summary.memory = gather_memory_peaks(grid_->world().get());
  summary.memory_plan = memory_plan_.bytes;
  run_agreed(grid_->world().get(), log_, [&] { metrics_->summary(summary); });
}

}  // namespace trellis
