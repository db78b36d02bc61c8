// The config table: each key once, with its default, its typed field and range or choices,
// and its help text. Add a key here and it is parsed, validated, listed by --help and
// written to config.ini.
#include "trellis/train/config/config_table.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/name_table.hpp"
#include "trellis/train/config/config_fields.hpp"

#include <climits>

namespace trellis {

namespace {

ConfigEntry make_entry(const char* name, const char* default_value, const char* help,
                       FieldBinding binding) {
  return {name,
          default_value,
          help,
          std::move(binding.allowed),
          std::move(binding.parse),
          std::move(binding.format)};
}

constexpr std::int64_t kIntMax = INT_MAX;  // for int64 counts that end up in an int

}  // namespace

// FIELD(section.field): the accessor a binding reads and writes.
#define FIELD(path)               \
  +[](TrainConfig & c) -> auto& { \
    return c.path;                \
  }
#define KEY(NAME, DEFAULT, HELP, BUILDER, ...) \
  make_entry(NAME, DEFAULT, HELP, BUILDER(NAME, __VA_ARGS__))

const std::vector<ConfigEntry>& config_table() {
  static const std::vector<ConfigEntry> table = {
      KEY("model.type", "mlp", "network family", named, FIELD(model.type), model_type_names()),
      KEY("model.hidden", "256,128", "hidden layer widths of the MLP, comma-separated", int_list,
          FIELD(model.hidden), 1, 1 << 24),
      KEY("model.activation", "relu", "activation of the MLP's hidden layers", choice,
          FIELD(model.activation), {"relu", "gelu", "gelu_tanh"}),
      KEY("model.dropout", "0",
          "dropout probability in [0, 1): mlp after each hidden activation, gpt on "
          "embeddings, attention weights and residual branches",
          real, FIELD(model.dropout), 0.0, 0.99),
      KEY("model.init", "kaiming", "weight initialisation of the MLP", choice, FIELD(model.init),
          {"kaiming", "xavier"}),
      KEY("model.widths", "32,64,128",
          "cnn: channels of each stage (stages after the first halve H and W)", int_list,
          FIELD(model.widths), 1, 1 << 24),
      KEY("model.blocks", "1", "cnn: residual blocks per stage", integer, FIELD(model.blocks), 1),
      KEY("model.block_widths", "",
          "cnn: inner width (first convolution's channels) of every block, stage by stage; "
          "empty = the stage widths (set by `trellis export --prune`)",
          int_list, FIELD(model.block_widths), 1, 1 << 24),
      KEY("model.sync_bn", "true", "cnn: BatchNorm statistics over all data-parallel ranks",
          boolean, FIELD(model.sync_bn)),
      KEY("model.n_layer", "4", "gpt: transformer blocks", integer, FIELD(model.n_layer), 1,
          1 << 20),  // n_layer + 2 pipeline units stay an int
      KEY("model.n_head", "4", "gpt: attention heads (divides model.d_model)", integer,
          FIELD(model.n_head), 1),
      KEY("model.d_model", "128", "gpt: embedding width", integer, FIELD(model.d_model), 1),
      KEY("model.seq_len", "128", "gpt: context length in tokens", integer, FIELD(model.seq_len),
          1),
      KEY("model.vocab", "0", "gpt: vocabulary size; 0 = the training set's vocab_size", integer,
          FIELD(model.vocab), 0),
      KEY("model.n_kv_head", "0",
          "gpt/llama: key/value heads (grouped-query attention; divides model.n_head); 0 = "
          "model.n_head",
          integer, FIELD(model.n_kv_head), 0),
      KEY("model.d_ff", "0",
          "gpt/llama: MLP hidden width; 0 = 4 d_model (gpt), 8 d_model / 3 rounded up to a "
          "multiple of 256 (llama)",
          integer, FIELD(model.d_ff), 0),
      KEY("model.positions", "auto",
          "gpt/llama: learned position table or rotary (auto: gpt "
          "learned, llama rope)",
          choice, FIELD(model.positions), {"auto", "learned", "rope"}),
      KEY("model.rope_theta", "10000",
          "rotary positions: base of the frequencies (Llama 3: 500000)", real,
          FIELD(model.rope_theta), 1.0001, 1e12),
      KEY("model.rope_scaling_factor", "0",
          "rotary positions: Llama 3 frequency scaling factor (Llama 3.1: 8); 0 = none", real,
          FIELD(model.rope_scaling_factor), 0.0, 1e6),
      KEY("model.rope_low_freq_factor", "1", "Llama 3 scaling: low_freq_factor", real,
          FIELD(model.rope_low_freq_factor), 1e-6, 1e6),
      KEY("model.rope_high_freq_factor", "4", "Llama 3 scaling: high_freq_factor", real,
          FIELD(model.rope_high_freq_factor), 1e-6, 1e6),
      KEY("model.rope_original_context", "8192",
          "Llama 3 scaling: original_max_position_embeddings", integer,
          FIELD(model.rope_original_context), 1),
      KEY("model.norm", "auto",
          "gpt/llama: layernorm or rmsnorm (auto: gpt layernorm, llama rmsnorm)", choice,
          FIELD(model.norm), {"auto", "layernorm", "rmsnorm"}),
      KEY("model.norm_eps", "1e-5", "gpt/llama: epsilon of the norms", real, FIELD(model.norm_eps),
          1e-12, 1.0),
      KEY("model.mlp", "auto",
          "gpt/llama: gelu (exact), gelu_tanh (GPT-2's tanh approximation) or swiglu MLP "
          "(auto: gpt gelu, llama swiglu)",
          choice, FIELD(model.mlp), {"auto", "gelu", "gelu_tanh", "swiglu"}),
      KEY("model.bias", "auto",
          "gpt/llama: biases on the attention and MLP Linears (auto: gpt "
          "true, llama false)",
          choice, FIELD(model.bias), {"auto", "true", "false"}),
      KEY("model.tied_head", "auto",
          "gpt/llama: output head tied to the token table (auto: gpt "
          "true, llama false)",
          choice, FIELD(model.tied_head), {"auto", "true", "false"}),
      KEY("train.global_batch", "128", "samples per optimizer step over all data-parallel ranks",
          integer, FIELD(train.global_batch), 1),
      KEY("train.micro_batch", "0",
          "samples per forward/backward on one rank; 0 = global_batch / dp "
          "(gradients accumulate over global_batch / (dp * micro_batch))",
          integer, FIELD(train.micro_batch), 0, kIntMax),
      KEY("train.epochs", "1", "passes over the training set (when train.max_steps is 0)", integer,
          FIELD(train.epochs), 1),
      KEY("train.max_steps", "0", "run length in steps, over train.epochs; 0 = train.epochs",
          integer, FIELD(train.max_steps), 0),
      KEY("train.seed", "1234", "seed of initialisation, shuffling and dropout", integer,
          FIELD(train.seed), 0),
      KEY("train.eval_batch", "1000", "samples read per evaluation batch on one rank", integer,
          FIELD(train.eval_batch), 1, kIntMax),
      KEY("train.eval_every_epoch", "true", "evaluate on data.test after every epoch", boolean,
          FIELD(train.eval_every_epoch)),
      KEY("train.eval_interval", "0", "also evaluate every this many steps; 0 = only at epoch ends",
          integer, FIELD(train.eval_interval), 0),
      KEY("train.time_limit", "0",
          "seconds of wall time for this run (checkpoint and stop before); 0 = none", real,
          FIELD(train.time_limit_s), 0.0, 1e9),
      KEY("train.eval_max_samples", "0",
          "evaluate on at most this many samples of data.test; 0 = all", integer,
          FIELD(train.eval_max_samples), 0),
      KEY("optim.type", "sgd", "optimizer", named, FIELD(optim.type), optimizer_type_names()),
      KEY("optim.lr", "0.05", "base learning rate", real, FIELD(optim.lr), 0.0, 1e3),
      KEY("optim.momentum", "0.9", "momentum (sgd, rmsprop)", real, FIELD(optim.momentum), 0.0,
          0.999999),
      KEY("optim.nesterov", "false", "Nesterov momentum (sgd)", boolean, FIELD(optim.nesterov)),
      KEY("optim.weight_decay", "0", "weight decay (L2 for sgd/adam/rmsprop, decoupled for adamw)",
          real, FIELD(optim.weight_decay), 0.0, 10.0),
      KEY("optim.beta1", "0.9", "Adam beta1", real, FIELD(optim.beta1), 0.0, 0.999999),
      KEY("optim.beta2", "0.999", "Adam beta2", real, FIELD(optim.beta2), 0.0, 0.99999999),
      KEY("optim.eps", "1e-8", "Adam / RMSProp epsilon", real, FIELD(optim.eps), 1e-30, 1.0),
      KEY("optim.alpha", "0.99", "RMSProp smoothing constant", real, FIELD(optim.alpha), 0.0,
          0.999999),
      KEY("optim.clip_norm", "0", "clip the global gradient norm to this value; 0 = off", real,
          FIELD(optim.clip_norm), 0.0, 1e9),
      KEY("sched.type", "constant", "learning-rate schedule", named, FIELD(sched.type),
          schedule_type_names()),
      KEY("sched.warmup_steps", "0", "linear warm-up steps (constant, step, cosine)", integer,
          FIELD(sched.warmup_steps), 0),
      KEY("sched.step_size", "1000", "steps between decays (step)", integer, FIELD(sched.step_size),
          1),
      KEY("sched.gamma", "0.1", "decay factor (step)", real, FIELD(sched.gamma), 0.0, 1.0),
      KEY("sched.min_lr", "0", "final learning rate (cosine)", real, FIELD(sched.min_lr), 0.0, 1e3),
      KEY("sched.stretch_on_resume", "false",
          "a resumed run of another length stretches the schedule; false: keeps its length",
          boolean, FIELD(stretch_schedule_on_resume)),
      KEY("sched.pct_start", "0.3", "fraction of steps spent rising (onecycle)", real,
          FIELD(sched.pct_start), 0.0, 1.0),
      KEY("sched.div_factor", "25", "initial lr = lr / div_factor (onecycle)", real,
          FIELD(sched.div_factor), 1.0, 1e9),
      KEY("sched.final_div_factor", "10000", "final lr = initial lr / final_div_factor (onecycle)",
          real, FIELD(sched.final_div_factor), 1.0, 1e12),
      KEY("data.train", "", "training set: an HDF5 file or a glob of shard files", text,
          FIELD(data.train)),
      KEY("data.test", "",
          "test (or validation) set: an HDF5 file or a glob of shard files (optional)", text,
          FIELD(data.test)),
      KEY("data.shuffle", "true", "reshuffle the training set every epoch", boolean,
          FIELD(data.shuffle)),
      KEY("data.remainder", "partial", "last incomplete global batch: partial (use it) | drop",
          choice, FIELD(data.remainder), {"partial", "drop"}),
      KEY("data.stage", "",
          "node-local directory (e.g. $TMPDIR or an NVMe mount) to copy the data files into, "
          "once per node, before training; empty: read in place",
          text, FIELD(data.stage)),
      KEY("data.cache", "none",
          "none: read every batch from HDF5 | memory: load the whole dataset "
          "into each rank's memory once (small datasets)",
          named, FIELD(data.cache_in_memory), {{"none", false}, {"memory", true}}),
      KEY("data.prefetch", "2",
          "training batches a loader thread reads ahead while the step runs; 0 = read each "
          "batch in the step",
          integer, FIELD(data.prefetch), 0, 64),
      KEY("data.augment", "none",
          "training image augmentation: none | a comma list of crop (shift by up to "
          "data.augment_pad), flip (horizontal), scale (zoom by up to data.augment_scale), "
          "rotate (by up to data.augment_degrees); never on evaluation",
          text, FIELD(data.augment)),
      KEY("data.augment_pad", "4", "crop: largest shift in pixels (the zero padding)", integer,
          FIELD(data.augment_pad), 0, 64),
      KEY("data.augment_scale", "0.1",
          "scale: largest relative zoom (0.1: factors uniform in [0.9, 1.1])", real,
          FIELD(data.augment_scale), 0.0, 0.5),
      KEY("data.augment_degrees", "10", "rotate: largest angle either way, in degrees", real,
          FIELD(data.augment_degrees), 0.0, 180.0),
      KEY("parallel.tp", "1",
          "tensor-parallel ranks per model replica (consecutive ranks: keep them on one node); "
          "mlp and gpt",
          integer, FIELD(parallel.tp), 1),
      KEY("parallel.pp", "1", "pipeline-parallel stages (mlp and gpt)", integer, FIELD(parallel.pp),
          1),
      make_entry(
          "parallel.schedule", "1f1b",
          "pipeline schedule: 1f1b (at most pp - stage in flight) | gpipe (all forwards first)",
          pipeline_schedule("parallel.schedule")),
      KEY("parallel.stages", "",
          "units per pipeline stage, e.g. 2,1,1 (mlp: one per Linear; gpt: embeddings, each "
          "block, head); empty: balanced by cost; needs parallel.pp > 1",
          text, FIELD(parallel.stages)),
      KEY("parallel.backend", "auto",
          "communicator for the model's tensors (auto: nccl in CUDA builds with NCCL)", choice,
          FIELD(parallel.backend), {"auto", "mpi", "nccl"}),
      KEY("kernels.conv", "auto",
          "convolution: auto (oneDNN or cuDNN where built, else im2col) | onednn | cudnn | im2col",
          choice, FIELD(kernels.conv), {"auto", "onednn", "cudnn", "im2col"}),
      KEY("kernels.conv_layout", "auto",
          "cnn activations: auto (oneDNN's blocked layout with oneDNN convs) | nchw | blocked",
          choice, FIELD(kernels.conv_layout), {"auto", "nchw", "blocked"}),
      KEY("memory.recompute", "none",
          "activation recomputation: none | selective (gpt, llama: norm and MLP activation "
          "outputs recomputed in backward) | full (every model: each group of blocks' "
          "forward rerun in backward from its input, a third more compute)",
          choice, FIELD(memory.recompute), {"none", "selective", "full"}),
      KEY("memory.recompute_every", "1",
          "full recomputation: blocks per group (about sqrt(n_layer) keeps the least)", integer,
          FIELD(memory.recompute_every), 1, 1 << 20),
      KEY("memory.limit_gb", "0",
          "refuse a layout whose memory plan needs more GiB per rank; 0 = no limit", real,
          FIELD(memory.limit_gb), 0.0, 1e9),
      KEY("parallel.bucket_mb", "25", "gradient all-reduce bucket size in MiB", real,
          FIELD(parallel.bucket_mb), 0.001, 1e6),
      KEY("parallel.sequence_parallel", "false",
          "tp > 1: split the blocks' token rows over tp (Megatron-SP; gpt, llama)", boolean,
          FIELD(parallel.sequence_parallel)),
      KEY("parallel.overlap", "true",
          "start each gradient bucket's all-reduce as soon as backward has filled it", boolean,
          FIELD(parallel.overlap)),
      KEY("parallel.grad_exchange", "auto",
          "dp gradient exchange: communicator (bucketed, overlapped collectives) | shared_memory "
          "(summed in place in a node's shared window; host builds) | auto",
          choice, FIELD(parallel.grad_exchange), {"auto", "communicator", "shared_memory"}),
      KEY("parallel.zero", "0",
          "sharded over dp: 0 none | 1 optimizer state | 2 + grads | 3 + params", integer,
          FIELD(parallel.zero), 0, 3),
      KEY("parallel.zero_shard_ranks", "0",
          "ZeRO-2/3: 0 = shard over all dp; N = groups of N (HSDP)", integer,
          FIELD(parallel.zero_shard_ranks), 0, kIntMax),
      KEY("parallel.grad_dtype", "fp32",
          "data-parallel gradient wire format: fp32 | bf16 | fp16 (buckets cast down, summed "
          "with fp32 arithmetic, cast back; communicator exchange only)",
          named, FIELD(parallel.grad_dtype), precision_names()),
      KEY("parallel.zero_gather_dtype", "fp32",
          "ZeRO-3: blocks' parameters gathered in fp32 | bf16 | fp16 (the shard stays fp32)", named,
          FIELD(parallel.gather_dtype), precision_names()),
      KEY("parallel.powersgd_rank", "0",
          "PowerSGD low-rank gradient compression with error feedback at this rank (e.g. 4); "
          "0 = off; communicator exchange with an fp32 wire",
          integer, FIELD(parallel.powersgd_rank), 0, 1024),
      KEY("parallel.powersgd_start_step", "100",
          "PowerSGD: optimizer steps of plain reduction before compression starts", integer,
          FIELD(parallel.powersgd_start_step), 0),
      KEY("parallel.powersgd_min_compression", "2",
          "PowerSGD: compress a matrix only when it shrinks by at least this factor", real,
          FIELD(parallel.powersgd_min_compression), 1.0, 1e6),
      KEY("precision.mode", "fp32",
          "fp32 | bf16 | fp16: GEMM and convolution operands (weights, activations, their "
          "gradients) in 16 bits with fp32 accumulation; master weights, optimizer state, "
          "softmax, norms and the loss stay fp32",
          named, FIELD(precision.mode), precision_names()),
      KEY("precision.kernels", "auto",
          "16-bit GEMM kernels: native (oneDNN / cuBLAS on 16-bit storage) | emulated (fp32 "
          "arithmetic on 16-bit-rounded operands) | auto (native on GPUs and on CPUs where "
          "oneDNN's bf16 GEMM measures >= 1.2x its fp32 one at start-up; emulated elsewhere)",
          choice, FIELD(precision.kernels), {"auto", "native", "emulated"}),
      KEY("precision.stochastic_rounding", "false",
          "round the 16-bit weight copies stochastically (counter RNG: layout-independent)",
          boolean, FIELD(precision.stochastic_rounding)),
      make_entry("precision.loss_scale", "auto",
                 "loss scaling: auto (dynamic for fp16) | dynamic | none | a fixed scale",
                 loss_scale("precision.loss_scale")),
      KEY("precision.initial_scale", "65536", "dynamic loss scaling: the first scale", real,
          FIELD(precision.initial_scale), 1e-30, 3.4e38),
      KEY("precision.growth_factor", "2", "dynamic loss scaling: growth after a clean interval",
          real, FIELD(precision.growth_factor), 1.000001, 1e6),
      KEY("precision.backoff_factor", "0.5", "dynamic loss scaling: factor after an overflow", real,
          FIELD(precision.backoff_factor), 1e-6, 0.999999),
      KEY("precision.growth_interval", "1000",
          "dynamic loss scaling: clean steps in a row before the scale grows", integer,
          FIELD(precision.growth_interval), 1),
      KEY("precision.hysteresis", "2",
          "dynamic loss scaling: overflows tolerated (steps skipped) before backing off", integer,
          FIELD(precision.hysteresis), 1),
      KEY("precision.min_scale", "1", "dynamic loss scaling: the scale never goes below this", real,
          FIELD(precision.min_scale), 1e-30, 3.4e38),
      KEY("run.dir", "runs/default", "directory for config.ini, metrics.jsonl and model.h5", text,
          FIELD(run_dir), /*allow_empty=*/false),
      KEY("run.overwrite", "false",
          "a new run deletes an earlier run in run.dir first; false: refused (exit 2)", boolean,
          FIELD(run_overwrite)),
      KEY("init.weights", "",
          "start from this weights file's parameters (a model.h5, `trellis import`); the model.* "
          "keys must describe its model; empty: fresh initialisation; a resumed run ignores it",
          text, FIELD(init.weights)),
      KEY("ckpt.dir", "", "checkpoint directory; empty: <run.dir>/checkpoints", text,
          FIELD(ckpt.dir)),
      KEY("ckpt.interval_steps", "0", "write a checkpoint every this many steps; 0 = not by steps",
          integer, FIELD(ckpt.interval_steps), 0),
      KEY("ckpt.interval_minutes", "0",
          "write a checkpoint every this many minutes; 0 = not by time", real,
          FIELD(ckpt.interval_minutes), 0.0, 1e9),
      KEY("ckpt.keep", "3", "checkpoints kept (older ones are removed); 0 = all", integer,
          FIELD(ckpt.keep), 0, kIntMax),
      KEY("ckpt.resume", "none",
          "none | auto (the newest valid checkpoint in ckpt.dir, if any) | a step directory; "
          "also --resume",
          text, FIELD(ckpt.resume), /*allow_empty=*/false),
      KEY("ckpt.margin_s", "60",
          "stop and checkpoint this many seconds (plus one step) before train.time_limit or "
          "SLURM_JOB_END_TIME",
          real, FIELD(ckpt.margin_s), 0.0, 1e9),
      KEY("monitor.peak_tflops", "0",
          "peak TFLOP/s of one device for MFU; 0: the data-sheet peak of a known GPU, or an "
          "SGEMM measured at start-up on CPUs",
          real, FIELD(monitor.peak_tflops), 0.0, 1e9),
      KEY("monitor.trace", "", "rank timelines (Perfetto JSON): a file, or a dir; empty: none",
          text, FIELD(monitor.trace), /*allow_empty=*/true),
      KEY("monitor.trace_steps", "3:5", "first:last, the optimizer steps monitor.trace records",
          text, FIELD(monitor.trace_steps), /*allow_empty=*/false),
      KEY("cost.price_per_device_hour", "0", "on-demand price of one device (GPU) for one hour",
          real, FIELD(cost.price_per_device_hour), 0.0, 1e9),
      KEY("cost.spot_price_per_device_hour", "0", "spot/preemptible price of one device-hour", real,
          FIELD(cost.spot_price_per_device_hour), 0.0, 1e9),
      KEY("budget.max_cost", "0",
          "stop (with a checkpoint) when the on-demand cost so far reaches this; 0 = no budget",
          real, FIELD(budget.max_cost), 0.0, 1e15),
      KEY("budget.max_hours", "0",
          "stop (with a checkpoint) after this many hours of wall time; 0 = no budget", real,
          FIELD(budget.max_hours), 0.0, 1e9),
      KEY("early_stop.metric", "none",
          "stop (with a checkpoint) when this evaluation metric stops improving: none | "
          "test_loss | test_accuracy",
          choice, FIELD(early_stop.metric), {"none", "test_loss", "test_accuracy"}),
      KEY("early_stop.patience", "3", "evaluations without improvement before stopping", integer,
          FIELD(early_stop.patience), 1),
      KEY("early_stop.min_delta", "0", "smallest change that counts as an improvement", real,
          FIELD(early_stop.min_delta), 0.0, 1e9),
      KEY("log.progress", "auto",
          "auto (a bar when stdout is a terminal and no MPI launcher started the process: "
          "mpirun's ranks always see a terminal) | bar | lines",
          choice, FIELD(log.progress), {"auto", "bar", "lines"}),
      KEY("log.interval", "50", "log every this many optimizer steps", integer, FIELD(log.interval),
          1),
      KEY("fault.timeout_s", "0",
          "watchdog: abort the job when a rank makes no progress for this long; 0 = off", real,
          FIELD(fault.timeout_s), 0.0, 1e9),
      KEY("fault.nonfinite", "skip",
          "non-finite loss or gradients: skip (the step, with a warning) | abort", named,
          FIELD(fault.skip_nonfinite), {{"skip", true}, {"abort", false}}),
      KEY("fault.max_skips", "5", "abort after this many consecutive skipped steps", integer,
          FIELD(fault.max_skips), 1),
      make_entry("fault.inject", "",
                 "testing aid: rank:step:kind, kind throw | hang | nan | signal (SIGUSR1) | "
                 "kill_in_checkpoint (SIGKILL) | freeze_in_checkpoint (SIGSTOP after a tensor)",
                 fault_injection("fault.inject")),
      KEY("prune.method", "none",
          "none | magnitude (gradual magnitude pruning of Linear and Conv weights, cubic "
          "schedule) | structured (MLP neurons, CNN block channels by L2 norm; `trellis export "
          "--prune` removes them)",
          choice, FIELD(prune.method), {"none", "magnitude", "structured"}),
      KEY("prune.scope", "layer",
          "layer (each weight tensor pruned to the target sparsity) | global (one magnitude "
          "threshold over all of them; magnitude only)",
          choice, FIELD(prune.scope), {"layer", "global"}),
      KEY("prune.initial_sparsity", "0", "sparsity at prune.start_step", real,
          FIELD(prune.initial_sparsity), 0.0, 0.999),
      KEY("prune.final_sparsity", "0.5", "sparsity from prune.end_step on", real,
          FIELD(prune.final_sparsity), 0.0, 0.999),
      KEY("prune.start_step", "1", "first step after which weights are pruned", integer,
          FIELD(prune.start_step), 1),
      KEY("prune.end_step", "0",
          "step at which the final sparsity is reached; 0 = the run's last step", integer,
          FIELD(prune.end_step), 0),
      KEY("prune.frequency", "100", "recompute the masks every this many steps", integer,
          FIELD(prune.frequency), 1),
  };
  return table;
}

const ConfigEntry* find_config_entry(const std::string& name) {
  for (const ConfigEntry& entry : config_table())
    if (name == entry.name) return &entry;
  return nullptr;
}

}  // namespace trellis
