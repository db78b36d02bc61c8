// CheckpointManager (train/loop/checkpoint_manager.hpp) on a tiny mlp at any world size: keep-N,
// resume of the newest usable checkpoint (`latest` only a hint) with parameters, optimizer state
// and counters, fallback past a damaged newest one, errors agreed on every rank, and model.h5.
//
// Only CHECKs (never REQUIRE) after the first collective, so a failing rank still takes part
// in every later collective instead of leaving the others waiting.
#include "mpi/checkpoint_helpers.hpp"
#include "unit/support/train_helpers.hpp"

#include "trellis/data/hdf5_attributes.hpp"
#include "trellis/train/files/weights_file.hpp"
#include "trellis/train/loop/checkpoint_manager.hpp"

#include <functional>
#include <map>
#include <memory>
#include <optional>

using namespace trellis;
using namespace trellis::ckpt_test;

namespace {

std::map<std::string, std::string> run_keys(const std::string& run_dir,
                                            std::map<std::string, std::string> keys) {
  keys.emplace("run.dir", run_dir);  // unless `keys` names them
  keys.emplace("ckpt.keep", "2");
  keys.emplace("ckpt.resume", "auto");
  return keys;
}

// A tiny mlp run (Adam) in run_dir, with its checkpoint manager.
struct Run : test::TinyRun {
  explicit Run(const std::string& run_dir, const std::map<std::string, std::string>& keys = {})
      : TinyRun(run_keys(run_dir, keys)) {
    manager = std::make_unique<CheckpointManager>(config, *grid, *model, *faults, *pruner, log);
  }
  std::string checkpoints() const { return config.derived.checkpoint_dir; }
  std::unique_ptr<CheckpointManager> manager;
};

std::vector<float> pattern(std::size_t n, float base) {
  std::vector<float> v(n);
  for (std::size_t e = 0; e < n; ++e) v[e] = base + 0.125f * static_cast<float>(e);
  return v;
}

// Every parameter and every optimizer state buffer of `run` set to values of `base`, and the
// optimizer's step count; has_state() checks them all.
void set_state(Run& run, float base, std::int64_t optimizer_steps) {
  nn::ParameterStore& store = run.model->store();
  for (std::size_t i = 0; i < store.size(); ++i)
    Kokkos::deep_copy(store.param(i), to_device("p", pattern(store.info(i).numel, base)));
  float offset = 100.0f;
  for (const auto& [name, view] : run.model->optimizer().state()) {
    for (std::size_t i = 0; i < store.size(); ++i) {
      const nn::ParamInfo& info = store.info(i);
      Kokkos::deep_copy(slice(view, info.offset, info.offset + info.numel),
                        to_device(name, pattern(info.numel, base + offset)));
    }
    offset += 100.0f;
  }
  run.model->optimizer().set_step_count(optimizer_steps);
}

bool has_state(Run& run, float base, std::int64_t optimizer_steps) {
  const nn::ParameterStore& store = run.model->store();
  bool same = run.model->optimizer().step_count() == optimizer_steps;
  for (std::size_t i = 0; i < store.size(); ++i)
    same = same && to_host(store.param(i)) == pattern(store.info(i).numel, base);
  float offset = 100.0f;
  for (const auto& [name, view] : run.model->optimizer().state()) {
    for (std::size_t i = 0; i < store.size(); ++i) {
      const nn::ParamInfo& info = store.info(i);
      same = same && to_host(slice(view, info.offset, info.offset + info.numel)) ==
                         pattern(info.numel, base + offset);
    }
    offset += 100.0f;
  }
  return same;
}

// Rank 0 changes the file while no rank has it open.
void on_rank0(const std::function<void()>& change) {
  barrier();
  if (world_rank() == 0) change();
  barrier();
}

// Checkpoints of steps 2 (state 1.0, 20 optimizer steps, 1 skipped) and 4 (state 2.0, 40, 3).
void save_two(Run& run) {
  set_state(run, 1.0f, 20);
  run.manager->save(2, 1);
  set_state(run, 2.0f, 40);
  run.manager->save(4, 3);
}

}  // namespace

TEST_CASE("checkpoint manager: save keeps the newest ckpt.keep step directories", "[ckpt_mpi]") {
  ScratchDir scratch("manager-keep");
  Run run(scratch.path());
  std::vector<std::string> dirs;
  for (std::int64_t step = 1; step <= 3; ++step) dirs.push_back(run.manager->save(step, 0));
  CHECK(dirs[2] == run.checkpoints() + "/step-0000003");
  CHECK(names_of(list_checkpoints(run.checkpoints())) ==
        std::vector<std::string>{"step-0000003", "step-0000002"});
  std::ifstream latest(run.checkpoints() + "/latest");
  std::string line;
  std::getline(latest, line);
  CHECK(line == "step-0000003");
}

TEST_CASE("checkpoint manager: resume loads the newest checkpoint, `latest` only a hint",
          "[ckpt_mpi]") {
  ScratchDir scratch("manager-resume");
  {
    Run first(scratch.path());
    save_two(first);
  }
  on_rank0([&] { std::ofstream(scratch.path() + "/checkpoints/latest") << "step-0000002\n"; });
  Run resumed(scratch.path());
  set_state(resumed, -5.0f, 0);
  std::optional<ResumePoint> point;
  const Outcome o = outcome([&] { point = resumed.manager->resume_if_asked(); });
  INFO(o.what);
  CHECK_FALSE(o.threw);
  CHECK(point.has_value());
  if (point) {
    CHECK(point->dir == resumed.checkpoints() + "/step-0000004");
    CHECK(point->step == 4);
    CHECK(point->skipped_steps == 3);
  }
  CHECK(has_state(resumed, 2.0f, 40));
}

TEST_CASE("checkpoint manager: ckpt.resume none, or no checkpoint, starts from scratch",
          "[ckpt_mpi]") {
  ScratchDir scratch("manager-none");
  Run empty(scratch.path());
  set_state(empty, 3.0f, 0);
  CHECK_FALSE(empty.manager->resume_if_asked().has_value());  // auto, nothing there
  save_two(empty);
  Run fresh(scratch.path(), {{"ckpt.resume", "none"}});
  set_state(fresh, 3.0f, 0);
  CHECK_FALSE(fresh.manager->resume_if_asked().has_value());
  CHECK(has_state(fresh, 3.0f, 0));
}

TEST_CASE("checkpoint manager: a flipped byte in the newest falls back to the previous one",
          "[ckpt_mpi]") {
  ScratchDir scratch("manager-flip");
  Run run(scratch.path());
  save_two(run);
  const std::string newest = run.checkpoints() + "/step-0000004";
  on_rank0([&] { flip_bit(newest + "/state.h5", "params/fc1.weight", 5); });

  Run resumed(scratch.path());
  set_state(resumed, -5.0f, 0);
  std::optional<ResumePoint> point;
  Outcome o = outcome([&] { point = resumed.manager->resume_if_asked(); });
  INFO(o.what);
  CHECK_FALSE(o.threw);
  CHECK((point && point->step == 2 && point->skipped_steps == 1));
  CHECK(has_state(resumed, 1.0f, 20));

  // Named explicitly, the damaged one is an error (no fallback), the same on every rank.
  Run named(scratch.path(), {{"ckpt.resume", newest}});
  o = outcome([&] { named.manager->resume_if_asked(); });
  CHECK((o.agreed && o.code == ExitCode::bad_input));
  CHECK(contains(o.what, "fc1.weight"));
  CHECK(same_on_every_rank(o.what));
  // So is a named one that is missing.
  Run missing(scratch.path(), {{"ckpt.resume", run.checkpoints() + "/step-0000009"}});
  o = outcome([&] { missing.manager->resume_if_asked(); });
  CHECK((o.agreed && o.code == ExitCode::bad_input));
  CHECK(contains(o.what, "step-0000009"));
  CHECK(same_on_every_rank(o.what));

  // Both damaged: an error naming the directory, nothing started over.
  on_rank0([&] {
    flip_bit(run.checkpoints() + "/step-0000002/state.h5", "optim/exp_avg/head.weight", 0);
  });
  Run none_left(scratch.path());
  o = outcome([&] { none_left.manager->resume_if_asked(); });
  CHECK((o.agreed && o.code == ExitCode::bad_input));
  CHECK(contains(o.what, "none of the 2 checkpoints"));
  CHECK(same_on_every_rank(o.what));
}

TEST_CASE("checkpoint manager: an edited stored config is damage, not another model",
          "[ckpt_mpi]") {
  ScratchDir scratch("manager-edit");
  Run run(scratch.path());
  save_two(run);
  bool edited = false;
  on_rank0([&] {
    const std::string file = run.checkpoints() + "/step-0000004/state.h5";
    H5File f(TRELLIS_H5(H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)));
    std::string config = read_string_attribute(f.get(), "config");
    const std::size_t at = config.find("hidden = 8");
    if (at == std::string::npos) return;
    config.replace(at, 10, "hidden = 6");
    write_string_attribute(f.get(), "config", config);
    edited = true;
  });
  if (world_rank() == 0) CHECK(edited);
  Run resumed(scratch.path());
  std::optional<ResumePoint> point;
  const Outcome o = outcome([&] { point = resumed.manager->resume_if_asked(); });
  INFO(o.what);
  CHECK_FALSE(o.threw);
  CHECK((point && point->step == 2));
  CHECK(has_state(resumed, 1.0f, 20));
}

TEST_CASE("checkpoint manager: another model's checkpoint is an error, never a fallback",
          "[ckpt_mpi]") {
  ScratchDir scratch("manager-other");
  {
    Run run(scratch.path());
    save_two(run);
  }
  Run other(scratch.path(), {{"model.hidden", "6"}});
  set_state(other, 3.0f, 0);
  const Outcome o = outcome([&] { other.manager->resume_if_asked(); });
  CHECK((o.agreed && o.code == ExitCode::bad_input));
  CHECK(contains(o.what, "model.hidden"));
  CHECK(contains(o.what, "step-0000004"));
  CHECK(same_on_every_rank(o.what));
  CHECK(has_state(other, 3.0f, 0));  // nothing loaded
}

TEST_CASE("checkpoint manager: model.h5 holds the parameters and the config", "[ckpt_mpi]") {
  ScratchDir scratch("manager-weights");
  Run run(scratch.path());
  set_state(run, 4.0f, 0);
  std::string path;
  Outcome o = outcome([&] { path = run.manager->write_weights(); });
  INFO(o.what);
  CHECK_FALSE(o.threw);
  CHECK(path == scratch.path() + "/model.h5");

  Run other(scratch.path() + "/other", {{"train.seed", "99"}});
  o = outcome([&] {
    CHECK(read_weights_config(path) == run.config.to_ini());
    load_weights(path, other.model->store(), other.model->model().buffers());
  });
  INFO(o.what);
  CHECK_FALSE(o.threw);
  const nn::ParameterStore& store = other.model->store();
  for (std::size_t i = 0; i < store.size(); ++i) {
    INFO(store.info(i).name);
    CHECK(to_host(store.param(i)) == pattern(store.info(i).numel, 4.0f));
  }
}
