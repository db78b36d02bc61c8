#include "trellis/train/evaluate.hpp"

#include "trellis/comm/mpi_check.hpp"
#include "trellis/train/agreement.hpp"
#include "trellis/train/model_factory.hpp"
#include "trellis/train/weights_file.hpp"

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <vector>

namespace trellis {

EvalResult evaluate_classifier(nn::Mlp& model, nn::SoftmaxCrossEntropy& loss, SampleDataset& data,
                               BatchBuffers& buffers, std::int64_t batch_rows, const MpiComm& dp) {
  TRELLIS_REQUIRE(batch_rows >= 1 && batch_rows <= buffers.capacity, "evaluation batch larger than its buffers");
  const std::int64_t n = data.size();
  const std::int64_t begin = n * dp.rank() / dp.size();
  const std::int64_t end = n * (dp.rank() + 1) / dp.size();
  nn::StepContext ctx;
  ctx.training = false;
  double sums[2] = {0.0, 0.0};  // loss sum, correct count
  std::vector<std::int64_t> indices;
  indices.reserve(static_cast<std::size_t>(batch_rows));
  for (std::int64_t first = begin; first < end; first += batch_rows) {
    const std::int64_t rows = std::min(batch_rows, end - first);
    indices.resize(static_cast<std::size_t>(rows));
    std::iota(indices.begin(), indices.end(), first);
    data.read(indices, buffers.host_inputs.data(), buffers.host_labels.data());
    buffers.upload(rows);
    const int m = static_cast<int>(rows);
    ConstMatrix logits = model.forward(buffers.input_rows(0, rows), m, ctx);
    const auto result = loss.forward(logits, buffers.label_rows(0, rows), m);
    sums[0] += result.loss_sum;
    sums[1] += static_cast<double>(result.correct);
  }
  TRELLIS_MPI(MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, dp.get()));
  EvalResult out;
  out.samples = n;
  out.loss = sums[0] / static_cast<double>(n);
  out.accuracy = sums[1] / static_cast<double>(n);
  return out;
}

void evaluate_weights_command(MPI_Comm world, const std::string& weights_path,
                              const std::string& data_spec, std::int64_t batch, const Logger& log) {
  MpiComm comm = MpiComm::duplicate(world);
  TrainConfig config;
  std::unique_ptr<SampleDataset> data;
  run_agreed(comm.get(), log, [&] {
    config = TrainConfig::from(RawConfig::parse_text(read_weights_config(weights_path),
                                                         "the config stored in " + weights_path, {}));
  });
  run_agreed(comm.get(), log, [&] {
    data = std::make_unique<SampleDataset>(SampleDataset::open(data_spec, comm.get()));
  });
  nn::ParameterStore store;
  nn::Mlp model(mlp_spec_from(config.model, data->sample_numel(), data->num_classes(), batch), store);
  store.finalize(config.train.seed);
  run_agreed(comm.get(), log, [&] { load_weights(weights_path, store); });
  nn::SoftmaxCrossEntropy loss(data->num_classes(), static_cast<int>(batch));
  BatchBuffers buffers(batch, data->sample_numel());
  const EvalResult result = evaluate_classifier(model, loss, *data, buffers, batch, comm);
  char line[256];
  std::snprintf(line, sizeof(line), "eval %s on %s: %lld samples, loss %.6f, accuracy %.6f",
                weights_path.c_str(), data_spec.c_str(), static_cast<long long>(result.samples),
                result.loss, result.accuracy);
  log.info(line);
}

}  // namespace trellis
