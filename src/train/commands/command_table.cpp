// The one list of trellis' subcommands and their options (command.hpp).
#include "trellis/train/commands/command.hpp"

namespace trellis {

namespace {

using K = OptionKind;

// `options` and the layout options of a command that runs a saved model spread over the ranks
// (--tp, --pp, --zero, --memory-limit-gb: sharded_model.hpp).
std::vector<CommandOption> with_layout_options(std::vector<CommandOption> options,
                                               const char* pp_help) {
  options.push_back({"--tp", K::integer, "N", "1", false,
                     "split each layer over N ranks (tensor parallel): a model larger than one "
                     "rank",
                     1});
  options.push_back({"--pp", K::integer, "N", "1", false, pp_help, 1});
  options.push_back({"--zero", K::integer, "0|3", "0", false,
                     "3: each rank keeps 1/dp of every block, gathered as the forward reaches it",
                     0});
  options.push_back({"--memory-limit-gb", K::real, "GB", "0", false,
                     "refuse a layout whose memory plan exceeds GB per rank (as memory.limit_gb)",
                     0});
  return options;
}

std::vector<Command> make_table() {
  return {
      {"train",
       "train a model (see `trellis train --help` for every config key)",
       "Trains the model a configuration describes (INI file plus --section.key=value\n"
       "overrides), writing checkpoints, metrics and the final model.h5 into run.dir.",
       {{"--resume", K::text, "auto|DIR", "", false,
         "resume from the newest usable checkpoint in run.dir (auto), from a run directory "
         "(its config.ini and newest checkpoint: nothing else to retype) or from a "
         "checkpoint's step directory (same as --ckpt.resume)",
         -std::numeric_limits<double>::infinity(), "ckpt.resume"},
        {"--dry-run", K::flag, "", "", false,
         "check the configuration, the data, the process grid, the model and its memory, then "
         "exit without training or writing anything"}},
       true,
       run_train_command},
      {"eval", "evaluate saved weights (fp32 or int8) on a dataset",
       "Rebuilds the model stored in a weights file (model.h5, or the int8 file of `trellis\n"
       "quantize`) and prints its loss, accuracy and throughput on a dataset, all ranks\n"
       "sharing the work. --tp, --pp and --zero 3 spread a model larger than one rank over\n"
       "the ranks, each reading only its pieces of the file.",
       with_layout_options(
           {{"--weights", K::text, "FILE", "", true, "the weights file"},
            {"--data", K::text, "FILE", "", true,
             "the dataset (a trellis HDF5 file or shard list)"},
            {"--batch", K::integer, "N", "0", false,
             "samples per forward pass; 0: the most whose activations fit in 512 MiB (and a "
             "quarter of free memory), at most 1000",
             0},
            {"--cache", K::flag, "", "", false,
             "read each rank's share into memory first (throughput of the model, not the files)"}},
           "split the layers into N pipeline stages"),
       false, run_eval_command},
      {"export",
       "write a pruned model without its pruned units, or a decoder as a Hugging Face folder",
       "--prune: writes a weights file of a structurally pruned model (prune.method =\n"
       "structured) with its pruned MLP neurons or CNN channels removed; `trellis eval` and\n"
       "`trellis quantize` take it as it is. --format hf: writes a gpt or llama model as a\n"
       "Hugging Face model folder (config.json, safetensors) for transformers' from_pretrained.",
       {{"--weights", K::text, "FILE", "", true, "the weights file (model.h5)"},
        {"--out", K::text, "PATH", "", true,
         "the weights file (--prune) or model folder (--format hf) to write"},
        {"--prune", K::flag, "", "", false, "remove the pruned units"},
        {"--format", K::text, "trellis|hf", "trellis", false,
         "trellis: a weights file (with --prune); hf: a Hugging Face model folder "
         "(GPT2LMHeadModel or LlamaForCausalLM)"},
        {"--dtype", K::text, "fp32|bf16|fp16", "fp32", false,
         "hf: the dtype of the safetensors tensors"},
        {"--shard-mb", K::real, "MIB", "5000", false,
         "hf: the largest safetensors file; larger models are sharded with an index", 0}},
       false,
       run_export_command},
      {"import",
       "read a Hugging Face model folder (GPT-2, Llama) into a weights file",
       "Reads a Hugging Face model folder (config.json, model.safetensors or its shards;\n"
       "GPT2LMHeadModel or LlamaForCausalLM, F32/F16/BF16 tensors) into a Trellis weights\n"
       "file that `trellis eval`, `generate` and training (--init.weights) take as it is.",
       {{"--hf", K::text, "DIR", "", true, "the Hugging Face model folder"},
        {"--out", K::text, "FILE", "", true, "the weights file to write"}},
       false,
       run_import_command},
      {"quantize",
       "int8 model calibrated on a dataset",
       "Post-training int8 quantization of every Linear and convolution: activation scales\n"
       "calibrated on the first BATCHES x BATCH samples of DATA, split over the ranks.",
       {{"--weights", K::text, "FILE", "", true, "the fp32 weights file"},
        {"--calib", K::text, "DATA", "", true, "the calibration dataset"},
        {"--out", K::text, "FILE", "", false,
         "the int8 weights file to write; default: beside the weights, X.h5 -> X.int8.h5"},
        {"--method", K::text, "minmax|percentile|entropy", "entropy", false,
         "how activation ranges are chosen"},
        {"--percentile", K::real, "P", "99.99", false,
         "percentile: the share of |x| kept unclipped, in percent", 0},
        {"--batches", K::integer, "N", "8", false, "calibration batches (over all ranks)", 1},
        {"--batch", K::integer, "B", "256", false, "samples per calibration batch", 1}},
       false,
       run_quantize_command},
      {"info",
       "build, backends, ranks and devices",
       "Prints how this binary was built (backends, vendor libraries, CPU features) and where\n"
       "every rank of this job runs in the process grid a configuration gives; for a language\n"
       "model with model.vocab set, its parameters, FLOPs and memory plan per rank.",
       {{"--ranks", K::integer, "N", "0", false,
         "plan the model's memory for a job of N ranks (default: this job's)", 0}},
       true,
       run_info_command},
      {"plan",
       "predict memory, step time, time to train and cost of every layout on a cluster",
       "Searches every layout of a configuration (nodes, dp x tp x pp, micro-batch, ZeRO,\n"
       "recomputation, precision) on the machine types of a cluster file, with its memory per\n"
       "rank from the memory plan, its step time, time to the target and cost on demand and on\n"
       "spot (checkpoint interval by Young/Daly), and prints the ranked plans and the sbatch\n"
       "line of the chosen one. --calibrate measures this machine as a machine type instead.",
       {{"--cluster", K::text, "FILE", "", false,
         "the machine types (inputs/clusters/*.ini); with --calibrate: prices and limits to keep"},
        {"--target-tokens", K::real, "N", "0", false, "train on N tokens (language models)", 0},
        {"--target-samples", K::real, "N", "0", false, "train on N samples", 0},
        {"--target-epochs", K::real, "E", "0", false,
         "train E passes over the training data (default: train.max_steps, else train.epochs)", 0},
        {"--deadline", K::real, "HOURS", "0", false, "the run must finish within HOURS", 0},
        {"--budget", K::real, "USD", "0", false, "the run may cost at most USD", 0},
        {"--precision", K::text, "LIST", "", false,
         "precisions to consider, e.g. fp32,bf16 or all (default: precision.mode)"},
        {"--max-micro-batch", K::integer, "N", "64", false, "largest micro-batch tried", 1},
        {"--rows", K::integer, "N", "12", false, "plans shown in the table", 1},
        {"--json", K::flag, "", "", false,
         "print every plan as JSON (for scripts and tools/plot_plan) instead of the table"},
        {"--calibrate", K::flag, "", "", false,
         "measure this machine (every rank of the job at once) and print it as a machine type"},
        {"--name", K::text, "NAME", "this-machine", false, "--calibrate: the machine type's name"},
        {"--out", K::text, "FILE", "", false, "--calibrate: write the machine type to FILE"}},
       true,
       run_plan_command},
      {"runs",
       "list the runs under a directory: how each ended, steps, best evaluation, time, cost",
       "Lists the runs under a directory (each sub-directory with a config.ini, summary.json\n"
       "or metrics.jsonl), from the files they wrote; reads only.",
       {{"--dir", K::text, "DIR", "runs", false, "the directory the runs are in (also: runs DIR)"}},
       false,
       run_runs_command,
       "--dir"},
      {"generate", "sample text from a trained gpt or llama",
       "Samples text from a trained language model, on one rank (or, with --tp or --zero 3,\n"
       "spread over all ranks); the same command prints the same text.",
       with_layout_options(
           {{"--weights", K::text, "FILE", "", true, "the weights file of a gpt run"},
            {"--prompt", K::text, "TEXT", "", false, "the text to continue"},
            {"--tokens", K::integer, "N", "200", false, "tokens to generate", 0},
            {"--temperature", K::real, "T", "1", false, "softmax temperature (0: greedy)", 0},
            {"--top-k", K::integer, "K", "0", false, "sample among the K likeliest (0: all)", 0},
            {"--seed", K::integer, "S", "0", false, "random seed of the draws", 0},
            {"--logits", K::text, "FILE", "", false,
             "also write the logits of every prompt position, float32 [prompt bytes, vocab], as a "
             ".npy file (before sampling)"},
            {"--no-cache", K::flag, "", "", false,
             "recompute the whole window for every token (no key/value cache; the reference)"}},
           "refused: generation has no pipeline stages"),
       false, run_generate_command},
  };
}

}  // namespace

const std::vector<Command>& command_table() {
  static const std::vector<Command> table = make_table();
  return table;
}

const Command* find_command(const std::string& name) {
  for (const Command& command : command_table())
    if (name == command.name) return &command;
  return nullptr;
}

}  // namespace trellis
