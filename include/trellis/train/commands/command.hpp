// The subcommands of `trellis`, each declared once in one table (command_table.cpp): its name,
// one line of help, its options and the function that runs it. That table alone drives
// parsing, `trellis --help`, `trellis CMD --help` and the suggestions for a mistyped command
// or option; main() only initialises MPI and Kokkos around the command it names.
#pragma once

#include "trellis/comm/device_binding.hpp"
#include "trellis/core/log.hpp"
#include "trellis/train/config/train_config.hpp"

#include <mpi.h>

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace trellis {

enum class OptionKind { text, integer, real, flag };

struct CommandOption {
  const char* name;  // "--weights"
  OptionKind kind;
  const char* value_name;     // "FILE", "N"; "" for a flag
  const char* default_value;  // "" : none (a flag defaults to off)
  bool required;
  const char* help;
  double minimum = -std::numeric_limits<double>::infinity();  // integer and real options
  // Non-empty: the option is a short form of this config key ("ckpt.resume" for --resume), and
  // becomes the override --<config_key>=value.
  const char* config_key = "";
};

// The options of one command line, checked against its command's table: every value is
// present (or its default), well-formed and within range.
class CommandArgs {
 public:
  const std::string& text(const std::string& option) const;
  std::int64_t integer(const std::string& option) const;
  double real(const std::string& option) const;
  bool flag(const std::string& option) const;
  // The config file (--config; "" when not given) and the --section.key=value overrides, in
  // the order given, of commands that read a run configuration.
  const std::string& config_file() const { return config_file_; }
  const std::vector<std::string>& overrides() const { return overrides_; }

 private:
  friend struct CommandLineParser;
  friend struct CommandLine parse_command_line(int argc, const char* const* argv);
  std::map<std::string, std::string> values_;
  std::string config_file_;
  std::vector<std::string> overrides_;
};

// What a command runs with; collective over world (every rank runs the same command).
struct CommandContext {
  MPI_Comm world;
  const NodeBinding& node;
  const Logger& log;
};

struct Command {
  const char* name;
  const char* summary;   // one line, for `trellis --help`
  const char* synopsis;  // the paragraph under `trellis CMD --help`
  std::vector<CommandOption> options;
  bool reads_config;  // takes --config FILE and --section.key=value overrides
  // Returns the process' exit code.
  int (*run)(const CommandContext& context, const CommandArgs& args);
  // The option one bare argument gives (`trellis runs DIR` for --dir), or null: none taken.
  const char* positional = nullptr;
};

// Every command, in the order `trellis --help` lists them.
const std::vector<Command>& command_table();
const Command* find_command(const std::string& name);  // null for an unknown name

// A parsed command line: the command (null for `trellis --help` and `trellis --version`), its
// arguments, and whether only help or the version was asked for.
struct CommandLine {
  const Command* command = nullptr;
  CommandArgs args;
  bool help = false;
  bool version = false;
};

// Parses argv; throws ConfigError naming the problem, with the closest command or option for a
// mistyped one, and the usage that applies.
CommandLine parse_command_line(int argc, const char* const* argv);

// `trellis --help` (command == null) and `trellis CMD --help`.
std::string command_help(const Command* command);

// The entry points the table names (one file each under train/commands/).
int run_train_command(const CommandContext& context, const CommandArgs& args);
int run_eval_command(const CommandContext& context, const CommandArgs& args);
int run_generate_command(const CommandContext& context, const CommandArgs& args);
int run_quantize_command(const CommandContext& context, const CommandArgs& args);
int run_export_command(const CommandContext& context, const CommandArgs& args);
int run_import_command(const CommandContext& context, const CommandArgs& args);
int run_info_command(const CommandContext& context, const CommandArgs& args);
int run_runs_command(const CommandContext& context, const CommandArgs& args);
int run_plan_command(const CommandContext& context, const CommandArgs& args);

// The run configuration of a command that reads one (--config and the overrides), parsed,
// validated and checked against the world's size on every rank alike (run_agreed); its
// warnings printed by rank 0.
TrainConfig agreed_run_config(const CommandContext& context, const CommandArgs& args);

}  // namespace trellis
