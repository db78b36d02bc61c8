#include "trellis/train/input/prefetch_source.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/trace.hpp"

#include <algorithm>

#ifdef __linux__
#include <pthread.h>
#include <sched.h>
#endif

namespace trellis {

PrefetchingTrainSource::Slot::Slot(std::int64_t capacity, const DataShape& shape)
    : buffers(capacity, shape.feature_numel, shape.seq_len) {}

PrefetchingTrainSource::PrefetchingTrainSource(std::unique_ptr<TrainSource> inner, int depth,
                                               std::int64_t local_capacity, std::int64_t end_step)
    : inner_(std::move(inner)),
      shape_(inner_->shape()),
      steps_per_epoch_(inner_->steps_per_epoch()),
      end_step_(end_step) {
  TRELLIS_REQUIRE(depth > 0, "prefetch depth must be positive");
  for (int i = 0; i < depth; ++i) ring_.push_back(std::make_unique<Slot>(local_capacity, shape_));
  loader_ = std::thread([this] { loader_loop(); });
}

PrefetchingTrainSource::~PrefetchingTrainSource() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  loader_.join();
}

std::string PrefetchingTrainSource::describe() const { return inner_->describe(); }

PrefetchingTrainSource::StepKey PrefetchingTrainSource::after(const StepKey& key) const {
  if (key.step_in_epoch + 1 < steps_per_epoch_)
    return {key.epoch, key.step_in_epoch + 1, key.global_step + 1};
  return {key.epoch + 1, 0, key.global_step + 1};
}

namespace {

// SCHED_BATCH: a woken loader does not preempt the step's thread on a busy core (it is woken by
// every load(), right inside the timed data phase), it waits for the next scheduling tick.
// Best effort: where the policy cannot be set, the default one is correct, only less polite.
void yield_to_the_step() {
#ifdef __linux__
  sched_param param{};
  param.sched_priority = 0;
  (void)pthread_setschedparam(pthread_self(), SCHED_BATCH, &param);
#endif
}

}  // namespace

void PrefetchingTrainSource::loader_loop() {
  trace::name_thread("loader");
  yield_to_the_step();
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] {
      return stopping_ || (started_ && paused_ == 0 && !failed_ && filled_ < ring_.size() &&
                           next_.global_step < end_step_);
    });
    if (stopping_) return;
    Slot& slot = *ring_[(head_ + filled_) % ring_.size()];
    slot.key = next_;
    reading_ = true;
    lock.unlock();
    // The slot past the filled range belongs to this thread until it is counted in.
    try {
      const trace::Span span("io", "read batch", slot.key.global_step + 1, "step");
      slot.error = nullptr;
      slot.part =
          inner_->load(slot.key.epoch, slot.key.step_in_epoch, slot.key.global_step, slot.buffers);
    } catch (...) {
      slot.error = std::current_exception();
    }
    lock.lock();
    reading_ = false;
    failed_ = slot.error != nullptr;
    ++filled_;
    next_ = after(slot.key);
    changed_.notify_all();
  }
}

void PrefetchingTrainSource::restart_at(const StepKey& key, std::unique_lock<std::mutex>& lock) {
  changed_.wait(lock, [&] { return !reading_; });
  filled_ = 0;
  failed_ = false;
  next_ = key;
  started_ = true;
  changed_.notify_all();
}

LocalPart PrefetchingTrainSource::load(std::int64_t epoch, std::int64_t step_in_epoch,
                                       std::int64_t global_step, BatchBuffers& buffers) {
  const StepKey want{epoch, step_in_epoch, global_step};
  std::unique_lock<std::mutex> lock(mutex_);
  TRELLIS_REQUIRE(paused_ == 0, "batch requested while reading is paused");
  // While the loader reads, next_ is the batch it reads.
  const bool predicted = started_ && (filled_ > 0 ? ring_[head_]->key == want : next_ == want);
  if (!predicted || global_step >= end_step_) {
    if (global_step >= end_step_) {  // past the planned steps: load it here, synchronously
      changed_.wait(lock, [&] { return !reading_; });
      return inner_->load(epoch, step_in_epoch, global_step, buffers);
    }
    restart_at(want, lock);
  }
  changed_.wait(lock, [&] { return filled_ > 0; });
  Slot& slot = *ring_[head_];
  lock.unlock();
  // The head slot stays this thread's until it is handed back below.
  if (slot.error) std::rethrow_exception(slot.error);
  const LocalPart part = slot.part;
  TRELLIS_REQUIRE(part.samples <= buffers.capacity, "prefetched batch larger than its buffers");
  const BatchBuffers& from = slot.buffers;
  if (from.feature_numel > 0)
    std::copy_n(from.host_features.data(), part.samples * from.feature_numel,
                buffers.host_features.data());
  if (from.seq_len > 0)
    std::copy_n(from.host_tokens.data(), part.samples * from.seq_len, buffers.host_tokens.data());
  std::copy_n(from.host_targets.data(), part.samples * from.rows_per_sample,
              buffers.host_targets.data());
  lock.lock();
  head_ = (head_ + 1) % ring_.size();
  --filled_;
  changed_.notify_all();
  return part;
}

void PrefetchingTrainSource::pause_reading() {
  std::unique_lock<std::mutex> lock(mutex_);
  ++paused_;
  changed_.wait(lock, [&] { return !reading_; });
}

void PrefetchingTrainSource::resume_reading() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    --paused_;
  }
  changed_.notify_all();
}

}  // namespace trellis
