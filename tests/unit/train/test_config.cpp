#include "catch.hpp"
#include "unit/support/text_helpers.hpp"

#include "trellis/core/error.hpp"
#include "trellis/train/config/train_config.hpp"

#include <cstdio>
#include <fstream>
#include <functional>
#include <string>

using trellis::ConfigError;
using trellis::RawConfig;
using trellis::TrainConfig;

namespace {

using trellis::test::contains;

std::string error_of(const std::function<void()>& f) {
  return trellis::test::message_of<ConfigError>(f);
}

std::string write_ini(const std::string& name, const std::string& text) {
  const std::string path = "/tmp/trellis_test_" + name + ".ini";
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST_CASE("config file values and command-line overrides merge, command line wins", "[config]") {
  auto path =
      write_ini("merge", "[train]\nglobal_batch = 64\nepochs = 2\n[model]\nhidden = 32, 16\n");
  auto raw = RawConfig::parse(path, {"--train.epochs=5", "--optim.lr=0.1"});
  auto cfg = TrainConfig::from(raw);
  CHECK(cfg.train.global_batch == 64);
  CHECK(cfg.train.epochs == 5);
  CHECK(cfg.optim.lr == Approx(0.1f));
  CHECK(cfg.model.hidden == std::vector<int>{32, 16});
  CHECK(cfg.sched.type == trellis::ScheduleType::constant);  // default
  CHECK(contains(cfg.to_ini(), "[train]\nglobal_batch = 64\n"));
  CHECK(contains(cfg.to_ini(), "epochs = 5"));
}

TEST_CASE("unknown keys are rejected with the closest known key", "[config]") {
  auto path = write_ini("unknown", "[train]\nglobal_bach = 64\n");
  auto message = error_of([&] { RawConfig::parse(path, {}); });
  CHECK(contains(message, "global_bach"));
  CHECK(contains(message, "train.global_batch"));
  CHECK(contains(message, path));
  message = error_of([&] { RawConfig::parse("", {"--optim.learning_rate=3"}); });
  CHECK(contains(message, "optim.learning_rate"));
  CHECK(contains(message, "command line"));
  CHECK(!error_of([&] { RawConfig::parse("/nonexistent/x.ini", {}); }).empty());
  CHECK(!error_of([&] { RawConfig::parse("", {"positional"}); }).empty());
}

TEST_CASE("bad values name the key and what is allowed", "[config]") {
  auto bad = [](const std::string& override_arg) {
    return error_of([&] { TrainConfig::from(RawConfig::parse("", {override_arg})); });
  };
  CHECK(contains(bad("--train.global_batch=abc"), "train.global_batch"));
  CHECK(contains(bad("--train.global_batch=0"), "integer >= 1"));
  CHECK(contains(bad("--optim.type=lion"), "one of: sgd, adam, adamw, rmsprop"));
  CHECK(contains(bad("--model.hidden=32,,8"), "model.hidden"));
  CHECK(contains(bad("--model.dropout=1.5"), "model.dropout"));
  CHECK(contains(bad("--data.shuffle=maybe"), "true or false"));
  CHECK(contains(bad("--optim.lr=nan"), "optim.lr"));
  CHECK(contains(bad("--parallel.tp=0"), "parallel.tp"));
  CHECK(contains(bad("--parallel.pp=0"), "parallel.pp"));
  CHECK(contains(bad("--parallel.schedule=zb"), "parallel.schedule"));
  CHECK(contains(bad("--parallel.zero=4"), "parallel.zero"));
  CHECK(contains(bad("--parallel.zero_gather_dtype=bf16"), "needs parallel.zero = 3"));
  CHECK(bad("--parallel.zero=3").empty());  // the default mlp: one unit per hidden layer
  CHECK(contains(bad("--parallel.backend=gloo"), "parallel.backend"));
  CHECK(bad("--parallel.tp=2").empty());
  CHECK(bad("--optim.lr=0.3").empty());
}

TEST_CASE("batch arithmetic is checked against dp and the micro-batch", "[config]") {
  auto cfg = TrainConfig::from(RawConfig::parse("", {"--train.global_batch=128"}));
  auto copy = cfg;
  copy.resolve_batch(4);
  CHECK(copy.micro_batch() == 32);
  CHECK(copy.accumulation_steps(4) == 1);
  CHECK(contains(error_of([&] {
                   auto c = cfg;
                   c.resolve_batch(3);
                 }),
                 "not divisible"));

  auto accum = TrainConfig::from(
      RawConfig::parse("", {"--train.global_batch=128", "--train.micro_batch=16"}));
  accum.resolve_batch(2);
  CHECK(accum.accumulation_steps(2) == 4);
  auto bad = TrainConfig::from(
      RawConfig::parse("", {"--train.global_batch=128", "--train.micro_batch=48"}));
  CHECK(contains(error_of([&] { bad.resolve_batch(2); }), "dp x micro_batch"));
}
