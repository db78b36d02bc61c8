// The command table drives parsing and help (train/commands/command.hpp): every command and
// option it lists is accepted, values are checked against their kind and minimum, required
// options are asked for, mistyped commands and options get the closest name, config overrides
// pass through to the commands that read a configuration, and nothing else does.
#include "catch.hpp"

#include "trellis/core/error.hpp"
#include "trellis/train/commands/command.hpp"
#include "trellis/train/commands/quantize_command.hpp"

#include <string>
#include <vector>

using trellis::CommandLine;

namespace {

CommandLine parse(std::vector<std::string> args) {
  args.insert(args.begin(), "trellis");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return trellis::parse_command_line(static_cast<int>(argv.size()), argv.data());
}

// The ConfigError's message, or "" when parsing succeeds.
std::string error_of(const std::vector<std::string>& args) {
  try {
    parse(args);
  } catch (const trellis::ConfigError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("every command of the table parses with its defaults", "[commands]") {
  for (const trellis::Command& command : trellis::command_table()) {
    INFO(command.name);
    CHECK(trellis::find_command(command.name) == &command);
    std::vector<std::string> args{command.name};
    for (const trellis::CommandOption& option : command.options)
      if (option.required) args.insert(args.end(), {option.name, "x"});
    const CommandLine line = parse(args);
    CHECK(line.command == &command);
    CHECK_FALSE(line.help);
    CHECK(contains(trellis::command_help(&command), std::string("trellis ") + command.name));
    CHECK(contains(trellis::command_help(nullptr), command.summary));
  }
}

TEST_CASE("typed values, defaults and both option spellings", "[commands]") {
  const CommandLine eval = parse({"eval", "--weights=w.h5", "--data", "d.h5", "--cache"});
  CHECK(eval.args.text("--weights") == "w.h5");
  CHECK(eval.args.text("--data") == "d.h5");
  CHECK(eval.args.integer("--batch") == 0);  // the table's default: chosen from memory
  CHECK(eval.args.flag("--cache"));
  const CommandLine gen =
      parse({"generate", "--weights", "g.h5", "--temperature=0.5", "--top-k", "7", "--seed=3"});
  CHECK(gen.args.real("--temperature") == 0.5);
  CHECK(gen.args.integer("--top-k") == 7);
  CHECK(gen.args.integer("--seed") == 3);
  CHECK(gen.args.integer("--tokens") == 200);
  CHECK_FALSE(parse({"export", "--weights", "a", "--out", "b"}).args.flag("--prune"));
}

TEST_CASE("commands that read a configuration take --config and overrides", "[commands]") {
  const CommandLine train = parse(
      {"train", "--config", "c.ini", "--optim.lr=0.1", "--train.epochs", "3", "--resume", "auto"});
  CHECK(train.args.config_file() == "c.ini");
  CHECK(train.args.overrides() ==
        std::vector<std::string>{"--optim.lr=0.1", "--train.epochs=3", "--ckpt.resume=auto"});
  CHECK(parse({"info", "--parallel.tp=2"}).args.overrides() ==
        std::vector<std::string>{"--parallel.tp=2"});
  // Commands without a configuration refuse overrides.
  CHECK(contains(error_of({"eval", "--weights", "w", "--data", "d", "--optim.lr=1"}),
                 "unknown eval option '--optim.lr=1'"));
}

TEST_CASE("bad command lines name the problem and the closest name", "[commands]") {
  CHECK(contains(error_of({}), "no command given"));
  CHECK(contains(error_of({"evl"}), "unknown command 'evl'; did you mean 'eval'?"));
  CHECK(contains(error_of({"eval", "--weigths", "w", "--data", "d"}),
                 "unknown eval option '--weigths'; did you mean '--weights'?"));
  CHECK(contains(error_of({"train", "--confg", "x.ini"}), "did you mean '--config'?"));
  CHECK(contains(error_of({"eval", "--weights", "w"}), "eval needs --data FILE"));
  CHECK(contains(error_of({"quantize"}), "--weights FILE, --calib DATA"));
  CHECK(contains(error_of({"eval", "--weights", "w", "--data", "d", "--batch", "abc"}),
                 "eval --batch takes an integer, not 'abc'"));
  CHECK(contains(error_of({"eval", "--weights", "w", "--data", "d", "--batch=-1"}),
                 "eval --batch must be >= 0"));
  CHECK(contains(error_of({"generate", "--weights", "w", "--tokens", "-1"}),
                 "--tokens must be >= 0"));
  CHECK(
      contains(error_of({"generate", "--weights", "w", "--temperature", "nan"}), "takes a number"));
  CHECK(contains(error_of({"export", "--weights", "a", "--out", "b", "--prune=yes"}),
                 "--prune takes no value"));
  CHECK(contains(error_of({"eval", "--weights"}), "needs a value"));
  // Every error shows the usage of the command it is about.
  CHECK(contains(error_of({"eval", "--weights", "w"}), "usage: trellis eval --weights FILE"));
}

TEST_CASE("help needs no required options", "[commands]") {
  CHECK(parse({"--help"}).help);
  CHECK(parse({"help"}).command == nullptr);
  CHECK(parse({"help", "quantize"}).command == trellis::find_command("quantize"));
  const CommandLine eval = parse({"eval", "--help"});
  CHECK(eval.help);
  CHECK(eval.command == trellis::find_command("eval"));
  CHECK(contains(trellis::command_help(trellis::find_command("train")), "optim.lr"));
  CHECK_FALSE(contains(trellis::command_help(trellis::find_command("eval")), "optim.lr"));
}

TEST_CASE("--version, and quantize's --out beside the weights", "[commands]") {
  for (const char* spelling : {"--version", "-V", "version"}) {
    const CommandLine line = parse({spelling});
    CHECK(line.version);
    CHECK(line.command == nullptr);
  }
  CHECK(contains(trellis::command_help(nullptr), "--version"));
  // quantize runs without --out: the int8 file goes beside the weights.
  const CommandLine quantize = parse({"quantize", "--weights", "runs/a/model.h5", "--calib", "d"});
  CHECK(quantize.args.text("--out").empty());
  CHECK(trellis::default_int8_path("runs/a/model.h5") == "runs/a/model.int8.h5");
  CHECK(trellis::default_int8_path("weights") == "weights.int8.h5");
}

TEST_CASE("runs takes its directory as a bare argument too", "[commands]") {
  CHECK(parse({"runs"}).args.text("--dir") == "runs");
  CHECK(parse({"runs", "experiments"}).args.text("--dir") == "experiments");
  CHECK(parse({"runs", "--dir", "x"}).args.text("--dir") == "x");
  CHECK(contains(error_of({"runs", "a", "b"}), "unknown runs option 'b'"));
  CHECK(contains(error_of({"eval", "w.h5"}), "unknown eval option 'w.h5'"));
  CHECK(contains(trellis::command_help(trellis::find_command("runs")),
                 "trellis runs [--dir DIR] [DIR]"));
}
