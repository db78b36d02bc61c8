// The config table and what is generated from it: typed parsing in each field's own type,
// the resolved config.ini, typed checkpoint comparison, derived values, the memory estimate.
#include "catch.hpp"
#include "unit/support/text_helpers.hpp"

#include "trellis/core/error.hpp"
#include "trellis/train/config/config_table.hpp"
#include "trellis/train/config/memory_estimate.hpp"
#include "trellis/train/config/train_config.hpp"

#include <functional>
#include <set>
#include <string>

using trellis::ConfigError;
using trellis::ModelType;
using trellis::RawConfig;
using trellis::TrainConfig;

namespace {

using trellis::test::contains;

std::string error_of(const std::function<void()>& f) {
  return trellis::test::message_of<ConfigError>(f);
}

TrainConfig parse(const std::vector<std::string>& overrides) {
  return TrainConfig::from(RawConfig::parse("", overrides));
}

std::string bad(const std::string& override_arg) {
  return error_of([&] { parse({override_arg}); });
}

}  // namespace

TEST_CASE("every key is declared once, and every default parses", "[config][table]") {
  std::set<std::string> names;
  for (const auto& entry : trellis::config_table()) {
    INFO(entry.name);
    CHECK(names.insert(entry.name).second);
    CHECK(std::string(entry.help).size() > 5);
  }
  CHECK(names.size() == trellis::config_table().size());
  // --help and the error messages say the same about what a key takes.
  const auto* optim_type = trellis::find_config_entry("optim.type");
  REQUIRE(optim_type != nullptr);
  CHECK(optim_type->allowed == "one of: sgd, adam, adamw, rmsprop");
  CHECK(contains(bad("--optim.type=lion"), optim_type->allowed));
  CHECK(contains(bad("--parallel.tp=0"), trellis::find_config_entry("parallel.tp")->allowed));
  for (const auto& key : trellis::config_table()) CHECK(key.allowed.size() > 3);
  const TrainConfig defaults = parse({});
  // The table's defaults reach the sections, the optimizer's and the schedule's specs alike.
  CHECK(defaults.optim.type == trellis::OptimizerType::sgd);
  CHECK(defaults.optimizer_spec().momentum == Approx(0.9f));
  CHECK(defaults.optimizer_spec().beta2 == Approx(0.999f));
  const trellis::ScheduleSpec sched = defaults.schedule_spec(500);
  CHECK(sched.base_lr == Approx(0.05f));
  CHECK(sched.step_size == 1000);
  CHECK(sched.total_steps == 500);
  CHECK(defaults.model.type == ModelType::mlp);
  CHECK(defaults.derived.checkpoint_dir == "runs/default/checkpoints");
  CHECK(defaults.data.stage.empty());
}

TEST_CASE("model.type is an enum with one name mapping", "[config][table]") {
  CHECK(parse({"--model.type=gpt"}).model.type == ModelType::gpt);
  CHECK(parse({"--model.type=cnn"}).model.type == ModelType::cnn);
  CHECK(std::string(trellis::model_type_name(ModelType::gpt)) == "gpt");
  CHECK(contains(bad("--model.type=rnn"), "one of: mlp, cnn, gpt"));
  // The gpt's shape rules come from the model code itself, before any data is read.
  const std::string heads = error_of([] {
    parse({"--model.type=gpt", "--model.d_model=130", "--model.n_head=4"});
  });
  CHECK(contains(heads, "model.d_model"));
  CHECK(contains(heads, "model.n_head"));
  CHECK(error_of([] { parse({"--model.d_model=130"}); }).empty());  // not a gpt: not its rule
}

TEST_CASE("integer keys are validated in their field's own type", "[config][table]") {
  // Regression: these were read as int64 and narrowed (pp = 4294967297 ran with pp = 1).
  CHECK(contains(bad("--parallel.pp=4294967297"), "parallel.pp = '4294967297'"));
  CHECK(contains(bad("--parallel.pp=4294967297"), "<= 2147483647"));
  CHECK(contains(bad("--model.d_model=4294967424"), "model.d_model"));
  CHECK(contains(bad("--model.seq_len=4294967424"), "model.seq_len"));
  CHECK(contains(bad("--model.blocks=4294967297"), "model.blocks"));
  CHECK(contains(bad("--model.vocab=4294967552"), "model.vocab"));
  CHECK(contains(bad("--ckpt.keep=4294967299"), "ckpt.keep"));
  CHECK(contains(bad("--train.global_batch=99999999999999999999"), "train.global_batch"));
  CHECK(contains(bad("--train.global_batch= 12"), "train.global_batch"));
  CHECK(contains(bad("--train.global_batch=0x10"), "train.global_batch"));
  CHECK(contains(bad("--train.seed=-1"), "train.seed"));
  CHECK(parse({"--parallel.pp=2147483647"}).parallel.pp == 2147483647);
  CHECK(parse({"--train.seed=18446744073709551615"}).train.seed == 18446744073709551615ull);
}

TEST_CASE("an absurd eval_batch is refused by the config, naming the key", "[config][table]") {
  // Regression: 2^63 - 1 ended in `vector::reserve` after the data was opened.
  const std::string message = bad("--train.eval_batch=9223372036854775807");
  CHECK(contains(message, "train.eval_batch"));
  CHECK(contains(message, "<= 2147483647"));
}

TEST_CASE("float keys take decimal numbers only", "[config][table]") {
  // Regression: strtod took hex, so train.time_limit = 0x10 meant 16 seconds.
  CHECK(contains(bad("--train.time_limit=0x10"), "train.time_limit"));
  CHECK(contains(bad("--train.time_limit=0x10"), "decimal number"));
  CHECK(contains(bad("--optim.lr=inf"), "optim.lr"));
  CHECK(contains(bad("--optim.lr=1e"), "optim.lr"));
  CHECK(contains(bad("--optim.lr=."), "optim.lr"));
  CHECK(contains(bad("--optim.lr=0.1 "), "optim.lr"));
  CHECK(parse({"--train.time_limit=16"}).train.time_limit_s == 16.0);
  CHECK(parse({"--optim.lr=.5"}).optim.lr == Approx(0.5f));
  CHECK(parse({"--optim.lr=+5e-1"}).optim.lr == Approx(0.5f));
  CHECK(parse({"--optim.eps=1E-8"}).optim.eps == Approx(1e-8f));
}

TEST_CASE("parallel.stages needs pipeline stages", "[config][table]") {
  // Regression: a stage split was accepted, and ignored, with parallel.pp = 1.
  const std::string message = bad("--parallel.stages=2,1");
  CHECK(contains(message, "parallel.stages"));
  CHECK(contains(message, "parallel.pp"));
  CHECK(error_of([] { parse({"--parallel.stages=2,1", "--parallel.pp=2"}); }).empty());
}

TEST_CASE("fault.inject is parsed, and its rank checked against the world", "[config][table]") {
  TrainConfig c = parse({"--fault.inject=3:7:signal"});
  CHECK(c.fault.inject_rank == 3);
  CHECK(c.fault.inject_step == 7);
  CHECK(c.fault.inject_kind == trellis::FaultKind::signal);
  CHECK(error_of([&] { c.check_against_world(4); }).empty());
  // Regression: a rank beyond the world was silently ignored.
  const std::string message = error_of([&] { c.check_against_world(2); });
  CHECK(contains(message, "fault.inject"));
  CHECK(contains(message, "rank 3"));
  CHECK(contains(bad("--fault.inject=0:0:throw"), "fault.inject"));
  CHECK(contains(bad("--fault.inject=0:1:explode"), "signal"));
  CHECK(contains(bad("--fault.inject=4294967296:1:throw"), "fault.inject"));
  CHECK(parse({}).fault.inject_rank == -1);
}

TEST_CASE("a time limit within the checkpoint margin gives a warning", "[config][table]") {
  CHECK(parse({}).warnings().empty());
  CHECK(parse({"--train.time_limit=3600"}).warnings().empty());
  // Regression: the run stopped at step 1 without a word.
  const auto warnings = parse({"--train.time_limit=30"}).warnings();
  REQUIRE(warnings.size() == 1);
  CHECK(contains(warnings[0], "train.time_limit = 30"));
  CHECK(contains(warnings[0], "ckpt.margin_s = 60"));
}

TEST_CASE("config errors escape bytes that are not UTF-8", "[config][table]") {
  // Regression: raw bytes went to the terminal and the log.
  const std::string value = bad("--optim.type=l\xff\xfeon");
  CHECK(contains(value, "l\\xFF\\xFEon"));
  CHECK(!contains(value, "\xff"));
  const std::string key = error_of([] { RawConfig::parse("", {"--optim.typ\xc3=1"}); });
  CHECK(contains(key, "optim.typ\\xC3"));
  CHECK(!contains(key, "\xc3="));
  // Valid UTF-8 stays as it is.
  CHECK(trellis::printable("caf\xc3\xa9") == "caf\xc3\xa9");
  CHECK(trellis::printable("a\x01z") == "a\\x01z");
  CHECK(trellis::printable("\xed\xa0\x80") == "\\xED\\xA0\\x80");  // a UTF-16 surrogate
}

TEST_CASE("config.ini is the typed values, with the derived ones in place", "[config][table]") {
  TrainConfig c = parse({"--model.hidden=256, 128", "--optim.lr=0.05", "--train.global_batch=128"});
  c.resolve_batch(4);
  CHECK(c.train.micro_batch == 0);  // the user's value stays apart from the derived one
  CHECK(c.micro_batch() == 32);
  const std::string ini = c.to_ini();
  CHECK(contains(ini, "[model]\ntype = mlp\nhidden = 256,128\n"));
  CHECK(contains(ini, "\nmicro_batch = 32\n"));
  CHECK(contains(ini, "\nlr = 0.05\n"));
  CHECK(contains(ini, "\neps = 1e-08\n"));
  CHECK(contains(ini, "\nfinal_div_factor = 10000\n"));
  CHECK(contains(ini, "\nstage = \n"));
  CHECK(contains(ini, "\nbackend = auto\n"));
  CHECK(contains(ini, "\ndir = \n"));  // ckpt.dir as given; the run resolves it

  TrainConfig gpt = parse({"--model.type=gpt"});
  gpt.resolve_vocab(65);
  CHECK(gpt.model.vocab == 0);
  CHECK(gpt.derived.vocab == 65);
  CHECK(contains(gpt.to_ini(), "\nvocab = 65\n"));
  TrainConfig fixed = parse({"--model.type=gpt", "--model.vocab=64"});
  CHECK(contains(error_of([&] { fixed.resolve_vocab(65); }), "model.vocab = 64"));

  // The text reads back into the same configuration.
  const TrainConfig back = TrainConfig::from(RawConfig::parse_text(ini, "config.ini", {}));
  CHECK(back.to_ini().substr(back.to_ini().find('\n')) == ini.substr(ini.find('\n')));
  CHECK(back.train.micro_batch == 32);
}

TEST_CASE("a micro-batch must fit one model call", "[config][table]") {
  TrainConfig c = parse({"--train.global_batch=4294967296"});
  CHECK(contains(error_of([&] { c.resolve_batch(1); }), "train.global_batch"));
  CHECK(error_of([&] { c.resolve_batch(4); }).empty());
}

TEST_CASE("checkpoint compatibility compares model-defining keys typed", "[config][table]") {
  const TrainConfig a = parse({"--model.hidden=256, 128"});
  const TrainConfig b = parse({"--model.hidden=256,128", "--optim.lr=0.1", "--train.epochs=9"});
  // Regression: compared as strings, "256, 128" and "256,128" refused the checkpoint.
  CHECK(trellis::first_model_difference(a, b).key.empty());
  const TrainConfig c = parse({"--model.hidden=256,64"});
  const trellis::ConfigDifference d = trellis::first_model_difference(a, c);
  CHECK(d.key == "model.hidden");
  CHECK(d.stored_value == "256,128");
  CHECK(d.current_value == "256,64");
  CHECK(trellis::first_model_difference(a, parse({"--train.seed=1"})).key == "train.seed");
  CHECK(trellis::first_model_difference(a, parse({"--optim.type=adam"})).key == "optim.type");
  CHECK(trellis::first_model_difference(a, parse({"--train.global_batch=64"})).key ==
        "train.global_batch");
}

TEST_CASE("the memory estimate names the key behind an absurd size", "[config][memory]") {
  trellis::DataShape images;
  images.sample_shape = {1, 28, 28};
  images.feature_numel = 784;
  images.classes = 10;
  const std::int64_t gib = std::int64_t{1} << 30;
  auto message = [&](const std::vector<std::string>& overrides, std::int64_t available) {
    return error_of([&] {
      TrainConfig c = parse(overrides);
      c.resolve_batch(1);
      trellis::check_memory_estimate(c, images, 1, 1, available);
    });
  };
  CHECK(message({}, 16 * gib).empty());  // the default MLP fits easily
  const std::string hidden = message({"--model.hidden=16777216"}, 16 * gib);
  CHECK(contains(hidden, "model.hidden = 16777216"));
  CHECK(contains(hidden, "GiB"));
  const std::string batch = message({"--train.global_batch=1000000000"}, 16 * gib);
  CHECK(contains(batch, "train.global_batch = 1000000000"));
  const std::string eval = message({"--train.eval_batch=2000000000", "--data.test=t.h5"}, gib);
  CHECK(contains(eval, "train.eval_batch"));

  trellis::DataShape tokens;
  tokens.classes = 256;
  tokens.seq_len = 128;
  const std::string wide = error_of([&] {
    TrainConfig c = parse({"--model.type=gpt", "--model.d_model=2147483644", "--model.n_head=4",
                           "--model.n_layer=1048576"});
    c.resolve_batch(1);
    c.resolve_vocab(256);
    trellis::check_memory_estimate(c, tokens, 1, 1, std::int64_t{1} << 62);
  });
  CHECK(contains(wide, "64-bit"));
  CHECK(contains(wide, "model."));
  // More blocks than an int counts pipeline units (n_layer + 2) for: refused by the table. (A
  // Debug build found it: INT_MAX + 2 units overflowed before the estimate could object.)
  const std::string deep = error_of([&] {
    parse({"--model.type=gpt", "--model.n_layer=2147483647"});
  });
  CHECK(contains(deep, "model.n_layer"));
  CHECK(contains(deep, "1048576"));
  CHECK(trellis::available_memory_bytes() > 0);
}

TEST_CASE("inference picks a batch that fits, and refuses one that does not", "[config][memory]") {
  trellis::DataShape tokens;
  tokens.classes = 256;
  tokens.seq_len = 128;
  // The demo GPT (inputs/gpt_char.ini): about 7 MB of activations per sequence, so the
  // 1000 sequences eval used to take by default needed about 7 GB.
  TrainConfig gpt = parse({"--model.type=gpt", "--model.n_layer=4", "--model.n_head=4",
                           "--model.d_model=128", "--model.seq_len=128"});
  gpt.resolve_vocab(256);
  const std::int64_t gib = std::int64_t{1} << 30;
  const std::int64_t batch = trellis::default_inference_batch(gpt, tokens, 16 * gib);
  const auto m = trellis::estimate_inference_memory(gpt, tokens, batch);
  CHECK(batch > 1);
  CHECK(batch < 200);
  CHECK(m.activation_bytes <= trellis::kInferenceBudgetBytes);
  CHECK(trellis::estimate_inference_memory(gpt, tokens, batch + 1).activation_bytes >
        trellis::kInferenceBudgetBytes);
  // Less memory free than the budget: a quarter of it.
  CHECK(trellis::default_inference_batch(gpt, tokens, gib / 4) < batch);
  // The MLP's samples are small: the cap.
  trellis::DataShape images;
  images.sample_shape = {1, 28, 28};
  images.feature_numel = 784;
  images.classes = 10;
  const TrainConfig mlp = parse({});
  CHECK(trellis::default_inference_batch(mlp, images, 16 * gib) == trellis::kMaxInferenceBatch);
  // An explicit batch that does not fit is refused, naming the option and one that fits.
  CHECK(error_of([&] {
          trellis::check_inference_memory(gpt, tokens, batch, "eval --batch", 16 * gib);
        }).empty());
  const std::string refused =
      error_of([&] { trellis::check_inference_memory(gpt, tokens, 100000, "eval --batch", gib); });
  CHECK(contains(refused, "eval --batch 100000"));
  CHECK(contains(refused, "or less would fit"));
}
