// PrefetchingTrainSource: a TrainSource that loads the next `depth` global batches on a
// background loader thread while the step runs (config data.prefetch).
//
// Order: the loader asks the wrapped source for exactly the batches the trainer will ask for,
// in the same order: after (epoch, step_in_epoch, global_step) comes (epoch, step + 1,
// global + 1), or (epoch + 1, 0, global + 1) at the end of an epoch, up to global step
// end_step. The samplers are pure functions of those numbers, so every batch is bit for bit
// the one the synchronous path loads. A request that is not the predicted next batch (a
// resumed run, a caller that jumps) drains the ring and restarts the loader there.
//
// Memory: a fixed ring of `depth` host batches, allocated in the constructor; load() copies
// the ready slot into the caller's host mirrors and hands the slot back (no allocation).
//
// Threads: the wrapped source is only ever called from the loader thread once it has started.
// HDF5 (Debian's parallel build) is not thread-safe, so the main thread must not call HDF5
// while the loader reads: it brackets its own HDF5 use (evaluation, checkpoints, weights) with
// pause_reading() / resume_reading(), which wait for the read in progress and hold the loader
// until resumed. MPI is initialised MPI_THREAD_FUNNELED, so the wrapped source must make no
// MPI call: the factory opens it with HDF5's POSIX driver (Hdf5Tuning::posix_reads) or from
// memory (data.cache = memory).
//
// Errors: an exception thrown by the wrapped source on the loader thread is stored in its slot
// and rethrown, unchanged (type and message), by the load() that asks for that batch; the
// loader stops after it. The destructor stops and joins the loader (after its read in
// progress, if any).
#pragma once

#include "trellis/train/input/data_source.hpp"

#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace trellis {

class PrefetchingTrainSource : public TrainSource {
 public:
  // local_capacity: the largest local batch (samples) one load may return on this rank.
  PrefetchingTrainSource(std::unique_ptr<TrainSource> inner, int depth, std::int64_t local_capacity,
                         std::int64_t end_step);
  PrefetchingTrainSource(const PrefetchingTrainSource&) = delete;
  PrefetchingTrainSource& operator=(const PrefetchingTrainSource&) = delete;
  ~PrefetchingTrainSource() override;

  DataShape shape() const override { return shape_; }
  std::int64_t steps_per_epoch() const override { return steps_per_epoch_; }
  LocalPart load(std::int64_t epoch, std::int64_t step_in_epoch, std::int64_t global_step,
                 BatchBuffers& buffers) override;
  std::string describe() const override;
  void pause_reading() override;
  void resume_reading() override;

 private:
  struct StepKey {
    std::int64_t epoch = 0, step_in_epoch = 0, global_step = 0;
    bool operator==(const StepKey& o) const {
      return epoch == o.epoch && step_in_epoch == o.step_in_epoch && global_step == o.global_step;
    }
  };
  struct Slot {
    Slot(std::int64_t capacity, const DataShape& shape);
    BatchBuffers buffers;  // host mirrors written by the loader
    StepKey key;
    LocalPart part;
    std::exception_ptr error;
  };

  StepKey after(const StepKey& key) const;
  void loader_loop();
  void restart_at(const StepKey& key, std::unique_lock<std::mutex>& lock);

  std::unique_ptr<TrainSource> inner_;
  const DataShape shape_;
  const std::int64_t steps_per_epoch_, end_step_;
  std::vector<std::unique_ptr<Slot>> ring_;  // [depth]

  // Guarded by mutex_: the ring's filled range [head_, head_ + filled_) and the loader state.
  std::mutex mutex_;
  std::condition_variable changed_;
  std::size_t head_ = 0, filled_ = 0;
  StepKey next_;           // the batch the loader loads next
  bool started_ = false;   // the loader has been given a first batch
  bool reading_ = false;   // the loader is inside inner_->load()
  bool failed_ = false;    // the last loaded slot holds an error: load nothing more
  bool stopping_ = false;  // destructor: leave the loop
  int paused_ = 0;         // pause_reading() calls not yet resumed
  std::thread loader_;
};

}  // namespace trellis
