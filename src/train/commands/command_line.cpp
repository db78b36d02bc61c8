// Parsing and help of the command table (command.hpp).
#include "trellis/core/closest_name.hpp"
#include "trellis/core/error.hpp"
#include "trellis/core/format.hpp"
#include "trellis/train/commands/command.hpp"
#include "trellis/train/config/config_table.hpp"
#include "trellis/train/config/raw_config.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace trellis {

namespace {

const CommandOption* find_option(const Command& command, const std::string& name) {
  for (const CommandOption& option : command.options)
    if (name == option.name) return &option;
  return nullptr;
}

std::string did_you_mean(const std::string& given, const std::vector<std::string>& candidates) {
  const std::string best = closest_name(given, candidates);
  return best.empty() ? "" : "; did you mean '" + best + "'?";
}

// "--weights FILE", "--cache", "[--batch N]" as the synopsis line shows them.
std::string option_usage(const CommandOption& option) {
  std::string text = option.name;
  if (option.kind != OptionKind::flag) text += std::string(" ") + option.value_name;
  return option.required ? text : "[" + text + "]";
}

std::string synopsis_line(const Command& command) {
  std::string line = std::string("trellis ") + command.name;
  if (command.reads_config) line += " [--config FILE]";
  for (const CommandOption& option : command.options) line += " " + option_usage(option);
  if (const CommandOption* option =
          command.positional ? find_option(command, command.positional) : nullptr)
    line += std::string(" [") + option->value_name + "]";
  if (command.reads_config) line += " [--section.key=value ...]";
  return line;
}

std::string usage_hint(const Command* command) {
  return command ? "\nusage: " + synopsis_line(*command) + "\n(see `trellis " + command->name +
                       " --help`)"
                 : "\n" + command_help(nullptr);
}

}  // namespace

const std::string& CommandArgs::text(const std::string& option) const {
  const auto it = values_.find(option);
  if (it == values_.end()) throw Error("internal: option " + option + " is not in the table");
  return it->second;
}

std::int64_t CommandArgs::integer(const std::string& option) const {
  return std::strtoll(text(option).c_str(), nullptr, 10);
}

double CommandArgs::real(const std::string& option) const {
  return std::strtod(text(option).c_str(), nullptr);
}

bool CommandArgs::flag(const std::string& option) const { return text(option) == "1"; }

// Friend of CommandArgs: fills it from argv, one argument at a time.
struct CommandLineParser {
  const Command& command;
  CommandArgs& args;

  [[noreturn]] void fail(const std::string& message) const {
    throw ConfigError(printable(message) + usage_hint(&command));
  }

  void check_value(const CommandOption& option, const std::string& value) const {
    if (option.kind == OptionKind::text) return;
    errno = 0;
    char* end = nullptr;
    const double number = option.kind == OptionKind::integer
                              ? static_cast<double>(std::strtoll(value.c_str(), &end, 10))
                              : std::strtod(value.c_str(), &end);
    const bool whole = !value.empty() && end && *end == '\0' && errno == 0;
    if (!whole || !std::isfinite(number))
      fail(std::string(command.name) + " " + option.name + " takes " +
           (option.kind == OptionKind::integer ? "an integer" : "a number") + ", not '" + value +
           "'");
    if (number < option.minimum)
      fail(std::string(command.name) + " " + option.name +
           " must be >= " + format_text("%g", option.minimum) + ", not " + value);
  }

  // argv[i] is "--name" or "--name=value"; the value may be the next argument.
  void take(const CommandOption& option, const std::string& arg, int argc, const char* const* argv,
            int& i) {
    const std::string name = option.name;
    std::string value;
    if (option.kind == OptionKind::flag) {
      if (arg != name) fail(std::string(command.name) + " " + name + " takes no value");
      value = "1";
    } else if (arg.size() > name.size()) {
      value = arg.substr(name.size() + 1);
    } else {
      if (i + 1 >= argc) fail("option " + name + " needs a value (" + option.value_name + ")");
      value = argv[++i];
    }
    check_value(option, value);
    if (option.config_key[0])
      args.overrides_.push_back(std::string("--") + option.config_key + "=" + value);
    else
      args.values_[name] = value;
  }

  void unknown(const std::string& arg) const {
    std::vector<std::string> names;
    for (const CommandOption& option : command.options) names.push_back(option.name);
    if (command.reads_config) names.push_back("--config");
    names.push_back("--help");
    const std::string name = arg.substr(0, arg.find('='));
    fail("unknown " + std::string(command.name) + " option '" + arg + "'" +
         did_you_mean(name, names));
  }

  // A config override: "--section.key=value" or "--section.key value".
  void take_override(const std::string& arg, int argc, const char* const* argv, int& i) {
    if (arg.find('=') == std::string::npos && i + 1 < argc &&
        std::string(argv[i + 1]).rfind("--", 0) != 0)
      args.overrides_.push_back(arg + "=" + argv[++i]);
    else
      args.overrides_.push_back(arg);
  }
};

CommandLine parse_command_line(int argc, const char* const* argv) {
  CommandLine line;
  if (argc < 2) throw ConfigError("no command given\n" + command_help(nullptr));
  const std::string name = argv[1];
  if (name == "--version" || name == "-V" || name == "version") {
    line.version = true;
    return line;
  }
  if (name == "--help" || name == "-h" || name == "help") {
    line.help = true;
    if (name == "help" && argc > 2) line.command = find_command(argv[2]);
    return line;
  }
  line.command = find_command(name);
  if (!line.command) {
    std::vector<std::string> names;
    for (const Command& command : command_table()) names.push_back(command.name);
    throw ConfigError("unknown command '" + printable(name) + "'" + did_you_mean(name, names) +
                      "\n" + command_help(nullptr));
  }
  const Command& command = *line.command;
  CommandLineParser parser{command, line.args};
  bool positional_taken = false;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    const std::string arg_name = arg.substr(0, arg.find('='));
    if (arg == "--help" || arg == "-h") {
      line.help = true;
    } else if (const CommandOption* option = find_option(command, arg_name)) {
      parser.take(*option, arg, argc, argv, i);
    } else if (command.reads_config && arg_name == "--config") {
      const CommandOption config{"--config", OptionKind::text, "FILE", "", false, ""};
      CommandArgs scratch;
      CommandLineParser{command, scratch}.take(config, arg, argc, argv, i);
      line.args.config_file_ = scratch.values_["--config"];
    } else if (command.reads_config && arg.rfind("--", 0) == 0 &&
               arg_name.find('.') != std::string::npos) {
      parser.take_override(arg, argc, argv, i);
    } else if (command.positional && !arg.empty() && arg[0] != '-' && !positional_taken) {
      // `trellis runs DIR`: the bare argument is the value of the command's positional option.
      positional_taken = true;
      parser.take(*find_option(command, command.positional),
                  std::string(command.positional) + "=" + arg, argc, argv, i);
    } else {
      parser.unknown(arg);
    }
  }
  if (line.help) return line;
  std::string missing;
  for (const CommandOption& option : command.options) {
    if (line.args.values_.count(option.name) || option.config_key[0]) continue;
    if (option.required)
      missing += (missing.empty() ? "" : ", ") + option_usage(option);
    else
      line.args.values_[option.name] = option.kind == OptionKind::flag ? "0" : option.default_value;
  }
  if (!missing.empty()) parser.fail(std::string(command.name) + " needs " + missing);
  return line;
}

namespace {

// `text` broken at spaces into lines of at most kHelpWidth columns, each after the first
// indented by `indent` (the column it starts in); a word longer than a line stays whole.
constexpr std::size_t kHelpWidth = 100;

std::string wrapped(const std::string& text, std::size_t indent) {
  const std::size_t width = kHelpWidth > indent + 20 ? kHelpWidth - indent : 20;
  std::string out, line;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(start, end - start);
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      out += line + "\n" + std::string(indent, ' ');
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    start = end + 1;
  }
  return out + line;
}

}  // namespace

std::string command_help(const Command* command) {
  std::string text;
  if (!command) {
    text = "usage: trellis <command> [options]   (trellis <command> --help for its options)\n";
    for (const Command& c : command_table()) text += format_text("  %-10s %s\n", c.name, c.summary);
    text += "trellis --version prints the version.\n";
    return text;
  }
  text = "usage: " + synopsis_line(*command) + "\n\n" + command->synopsis + "\n";
  if (!command->options.empty() || command->reads_config) text += "\noptions:\n";
  if (command->reads_config)
    text += format_text("  %-34s %s\n", "--config FILE",
                        "the run configuration (INI); keys not given take their defaults");
  for (const CommandOption& option : command->options) {
    std::string left = option.name;
    if (option.kind != OptionKind::flag) left += std::string(" ") + option.value_name;
    std::string help = option.help;
    if (option.required) help += " (required)";
    if (option.default_value[0]) help += std::string(" (default ") + option.default_value + ")";
    text += format_text("  %-34s ", left.c_str()) + wrapped(help, 37) + "\n";
  }
  if (command->reads_config) {
    text += "\nconfig keys by section (INI [section] key = value, or --section.key=value):\n";
    std::string section;
    for (const ConfigEntry& key : config_table()) {
      const std::string name = key.name;
      const std::string this_section = name.substr(0, name.find('.'));
      if (this_section != section) text += "\n[" + (section = this_section) + "]\n";
      const std::string value = key.default_value[0] ? key.default_value : "\"\"";
      text += format_text("  %-24s %-14s ", key.name, value.c_str()) +
              wrapped(std::string(key.help) + " (" + key.allowed + ")", 42) + "\n";
    }
  }
  return text;
}

}  // namespace trellis
