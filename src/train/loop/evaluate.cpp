#include "trellis/train/loop/evaluate.hpp"

#include "trellis/comm/mpi_check.hpp"

#include <algorithm>

namespace trellis {

EvalResult evaluate_model(PipelineEngine& engine, EvalSource& data, BatchBuffers& buffers,
                          std::int64_t batch, const MpiComm& dp, const MpiComm& pp) {
  const nn::Model& model = engine.model();
  TRELLIS_REQUIRE(batch >= 1 && batch <= buffers.capacity,
                  "evaluation batch larger than the buffers' capacity");
  const std::int64_t rows_per_sample = model.rows_per_sample();
  double sums[2] = {0.0, 0.0};  // loss sum, correct count
  const std::int64_t local = data.local_samples();
  // ZeRO-3 gathers each block over the dp ranks in every forward: all of them must run as
  // many forwards, though their shares differ by a sample (54 samples over 4 ranks, batch 1:
  // 14, 14, 13, 13). A rank with fewer runs the rest on one sample it holds and drops them.
  std::int64_t forwards = 0;
  for (std::int64_t first = 0; first < local; first += batch) {
    const std::int64_t count = std::min(batch, local - first);
    forwards += (count + model.capacity() - 1) / model.capacity();
  }
  std::int64_t most_forwards = forwards;
  TRELLIS_MPI(MPI_Allreduce(MPI_IN_PLACE, &most_forwards, 1, MPI_INT64_T, MPI_MAX, dp.get()));
  for (std::int64_t first = 0; first < local; first += batch) {
    const std::int64_t count = std::min(batch, local - first);
    data.load(first, count, buffers);
    buffers.upload(count);
    // In pieces the model holds: the samples are independent in evaluation (BatchNorm on
    // its running statistics), so the sums are those of one pass over the batch.
    for (std::int64_t done = 0; done < count; done += model.capacity()) {
      const std::int64_t piece = std::min<std::int64_t>(model.capacity(), count - done);
      MicroBatch mb = buffers.micro_batch(done, piece);
      mb.ctx.training = false;
      const StageSums result = engine.evaluate(mb);
      sums[0] += result.loss_sum;
      sums[1] += result.correct;
    }
  }
  for (; forwards < most_forwards; ++forwards) {
    if (local == 0) buffers.upload(1);  // nothing loaded: the zeros the buffers start with
    MicroBatch mb = buffers.micro_batch(0, 1);
    mb.ctx.training = false;
    engine.evaluate(mb);
  }
  // The loss lives on the last pipeline stage; then the dp ranks' shares add up.
  TRELLIS_MPI(MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, pp.get()));
  TRELLIS_MPI(MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, dp.get()));
  EvalResult out;
  out.samples = data.total_samples();
  out.targets = out.samples * rows_per_sample;
  out.loss = sums[0] / static_cast<double>(out.targets);
  out.accuracy = sums[1] / static_cast<double>(out.targets);
  return out;
}

}  // namespace trellis
