// PrefetchingTrainSource (data.prefetch): the same batches in the same order as the wrapped
// source, errors of the loader thread rethrown at the batch that failed, pause_reading()
// honoured, and the loader joined on destruction whatever it is doing.
#include "catch.hpp"

#include "trellis/core/error.hpp"
#include "trellis/train/input/prefetch_source.hpp"

#include <atomic>
#include <chrono>
#include <thread>

namespace {

using namespace trellis;

// Batch (epoch, step, global) holds features f(epoch, step, global, element); throws InputError
// at global step `fail_at`; each load takes `delay`.
class FakeSource : public TrainSource {
 public:
  static constexpr std::int64_t kSamples = 3, kNumel = 4, kStepsPerEpoch = 5;
  std::int64_t fail_at = -1;
  std::chrono::milliseconds delay{0};
  std::atomic<int> loads{0};

  DataShape shape() const override {
    DataShape s;
    s.sample_shape = {kNumel};
    s.feature_numel = kNumel;
    s.classes = 10;
    return s;
  }
  std::int64_t steps_per_epoch() const override { return kStepsPerEpoch; }
  LocalPart load(std::int64_t epoch, std::int64_t step, std::int64_t global,
                 BatchBuffers& buffers) override {
    ++loads;
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
    if (global == fail_at) throw InputError("data.h5: bad chunk at step " + std::to_string(global));
    for (std::int64_t i = 0; i < kSamples * kNumel; ++i)
      buffers.host_features(i) = static_cast<float>(epoch * 1000 + step * 100 + global + i * 0.5);
    for (std::int64_t i = 0; i < kSamples; ++i)
      buffers.host_targets(i) = static_cast<std::int32_t>(global * 10 + i);
    LocalPart part;
    part.samples = kSamples;
    part.first_position = global;  // any value that identifies the batch
    part.global_samples = kSamples;
    return part;
  }
  std::string describe() const override { return "fake"; }
};

struct Batch {
  LocalPart part;
  std::vector<float> features;
  std::vector<std::int32_t> targets;
};

Batch load_one(TrainSource& source, std::int64_t global) {
  BatchBuffers buffers(FakeSource::kSamples, FakeSource::kNumel, 0);
  Batch b;
  b.part = source.load(global / FakeSource::kStepsPerEpoch, global % FakeSource::kStepsPerEpoch,
                       global, buffers);
  b.features.assign(buffers.host_features.data(),
                    buffers.host_features.data() + b.part.samples * FakeSource::kNumel);
  b.targets.assign(buffers.host_targets.data(), buffers.host_targets.data() + b.part.samples);
  return b;
}

void check_same(const Batch& a, const Batch& b) {
  CHECK(a.part.samples == b.part.samples);
  CHECK(a.part.first_position == b.part.first_position);
  CHECK(a.features == b.features);
  CHECK(a.targets == b.targets);
}

}  // namespace

TEST_CASE("prefetching yields the wrapped source's batches in order, across epochs",
          "[data][prefetch]") {
  for (int depth : {1, 2, 4}) {
    FakeSource reference;
    PrefetchingTrainSource prefetched(std::make_unique<FakeSource>(), depth, FakeSource::kSamples,
                                      17);
    CHECK(prefetched.steps_per_epoch() == FakeSource::kStepsPerEpoch);
    for (std::int64_t g = 0; g < 17; ++g)
      check_same(load_one(prefetched, g), load_one(reference, g));
    // Past end_step: loaded synchronously, still the right batch.
    check_same(load_one(prefetched, 17), load_one(reference, 17));
  }
}

TEST_CASE("prefetching restarts at a batch that is not the predicted next one",
          "[data][prefetch]") {
  FakeSource reference;
  PrefetchingTrainSource prefetched(std::make_unique<FakeSource>(), 2, FakeSource::kSamples, 100);
  for (std::int64_t g : {7, 8, 9, 3, 4, 20, 21, 22, 23})
    check_same(load_one(prefetched, g), load_one(reference, g));
}

TEST_CASE("an error on the loader thread is rethrown at the batch that failed",
          "[data][prefetch]") {
  auto inner = std::make_unique<FakeSource>();
  inner->fail_at = 4;
  FakeSource* fake = inner.get();
  PrefetchingTrainSource prefetched(std::move(inner), 3, FakeSource::kSamples, 100);
  for (std::int64_t g = 0; g < 4; ++g) CHECK(load_one(prefetched, g).part.first_position == g);
  CHECK_THROWS_AS(load_one(prefetched, 4), InputError);  // the original type (exit code 3)
  CHECK_THROWS_WITH(load_one(prefetched, 4), "data.h5: bad chunk at step 4");
  // The loader stopped after the failure: it reads nothing beyond it.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(fake->loads.load() == 5);
  // Destruction joins the (idle) loader: the test returning is the check.
}

TEST_CASE("the loader is joined when destroyed mid-read or with a full ring", "[data][prefetch]") {
  {
    auto inner = std::make_unique<FakeSource>();
    inner->delay = std::chrono::milliseconds(50);
    PrefetchingTrainSource prefetched(std::move(inner), 2, FakeSource::kSamples, 100);
    load_one(prefetched, 0);  // the loader is now reading batch 1 or 2
  }
  {
    PrefetchingTrainSource prefetched(std::make_unique<FakeSource>(), 4, FakeSource::kSamples, 100);
    load_one(prefetched, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // ring full, loader waiting
  }
  {
    PrefetchingTrainSource never_used(std::make_unique<FakeSource>(), 2, FakeSource::kSamples, 100);
  }
  SUCCEED("no hang");
}

TEST_CASE("pause_reading holds the loader until resume_reading", "[data][prefetch]") {
  auto inner = std::make_unique<FakeSource>();
  inner->delay = std::chrono::milliseconds(5);
  FakeSource* fake = inner.get();
  PrefetchingTrainSource prefetched(std::move(inner), 4, FakeSource::kSamples, 100);
  load_one(prefetched, 0);
  int before = 0;
  {
    ReadingPaused paused(prefetched);
    before = fake->loads.load();
    std::this_thread::sleep_for(std::chrono::milliseconds(40));
    CHECK(fake->loads.load() == before);  // no read started (nor in progress) while paused
  }
  FakeSource reference;
  for (std::int64_t g = 1; g < 8; ++g) check_same(load_one(prefetched, g), load_one(reference, g));
}
