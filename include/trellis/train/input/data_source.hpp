// What a model trains and evaluates on, as the trainer sees it: global batches split into
// contiguous per-rank blocks, and an evaluation set split the same way. One implementation per
// data format (labelled samples, token streams); the trainer does not know which it drives.
#pragma once

#include "trellis/core/shape.hpp"
#include "trellis/data/data_shape.hpp"
#include "trellis/train/input/batch_buffers.hpp"

#include <cstdint>
#include <string>

namespace trellis {

// This rank's part of one global batch.
struct LocalPart {
  std::int64_t samples = 0;         // samples (images, sequences) loaded on this rank
  std::int64_t first_position = 0;  // position of the first of them in the global batch
  std::int64_t global_samples = 0;  // samples in the whole global batch (the loss divisor)
};

class TrainSource {
 public:
  virtual ~TrainSource() = default;
  virtual DataShape shape() const = 0;
  virtual std::int64_t steps_per_epoch() const = 0;
  // Loads this rank's part of global batch `step_in_epoch` of `epoch` (global_step counts
  // steps over all epochs) into the host mirrors of `buffers`; does not upload.
  virtual LocalPart load(std::int64_t epoch, std::int64_t step_in_epoch, std::int64_t global_step,
                         BatchBuffers& buffers) = 0;
  virtual std::string describe() const = 0;  // "60000 samples of [1, 28, 28], 10 classes"
  // A source that reads on a background thread (PrefetchingTrainSource) finishes the read in
  // progress and starts none until resume_reading(). HDF5 is not thread-safe: the main thread
  // calls this before it uses HDF5 itself. Synchronous sources do nothing.
  virtual void pause_reading() {}
  virtual void resume_reading() {}
};

// pause_reading() for one scope.
class ReadingPaused {
 public:
  explicit ReadingPaused(TrainSource& source) : source_(source) { source_.pause_reading(); }
  ReadingPaused(const ReadingPaused&) = delete;
  ReadingPaused& operator=(const ReadingPaused&) = delete;
  ~ReadingPaused() { source_.resume_reading(); }

 private:
  TrainSource& source_;
};

class EvalSource {
 public:
  virtual ~EvalSource() = default;
  virtual DataShape shape() const = 0;
  virtual std::int64_t total_samples() const = 0;  // over all ranks
  virtual std::int64_t local_samples() const = 0;  // this rank's contiguous block
  // Loads samples [offset, offset + count) of this rank's block into the host mirrors.
  virtual void load(std::int64_t offset, std::int64_t count, BatchBuffers& buffers) = 0;
  virtual std::string describe() const = 0;
};

}  // namespace trellis
