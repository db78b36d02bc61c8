#include "trellis/train/commands/quantize_command.hpp"
#include "trellis/train/commands/command.hpp"

#include "trellis/comm/agreement.hpp"
#include "trellis/comm/mpi_check.hpp"
#include "trellis/comm/mpi_comm.hpp"
#include "trellis/core/error.hpp"
#include "trellis/core/format.hpp"
#include "trellis/data/tokenizer_blob.hpp"
#include "trellis/int8/calibration.hpp"
#include "trellis/int8/quantize_layer.hpp"
#include "trellis/nn/batchnorm.hpp"
#include "trellis/nn/layer.hpp"
#include "trellis/train/commands/saved_model.hpp"
#include "trellis/train/config/memory_estimate.hpp"
#include "trellis/train/config/train_config.hpp"
#include "trellis/train/files/int8_weights.hpp"
#include "trellis/train/files/weights_file.hpp"
#include "trellis/train/input/batch_buffers.hpp"
#include "trellis/train/input/data_factory.hpp"

#include <sys/stat.h>
#include <algorithm>
#include <map>

namespace trellis {

namespace {

// Runs the model forward (inference) on this rank's share of the calibration samples.
void forward_over(nn::Model& model, EvalSource& data, BatchBuffers& buffers, std::int64_t samples,
                  std::int64_t batch) {
  for (std::int64_t first = 0; first < samples; first += batch) {
    const std::int64_t count = std::min(batch, samples - first);
    data.load(first, count, buffers);
    buffers.upload(count);
    nn::ModelInput input;
    if (model.takes_tokens())
      input.tokens = buffers.token_rows(0, count);
    else
      input.features = buffers.feature_rows(0, count);
    nn::StepContext ctx;
    ctx.training = false;
    model.forward(input, static_cast<int>(count), ctx);
  }
}

std::int64_t file_bytes(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<std::int64_t>(st.st_size) : -1;
}

// Each target layer's input range over every rank's calibration samples and (percentile,
// entropy) the histogram of its values. Collective over comm.
struct Calibration {
  std::vector<int8::ActivationObserver> observers;  // one per target, reduced over the ranks
  std::vector<float> lows, highs;
};

Calibration calibrate(nn::Model& model, const std::vector<nn::Layer*>& targets, EvalSource& data,
                      int8::CalibrationMethod method, std::int64_t batch, const MpiComm& comm,
                      const Logger& log) {
  const std::int64_t share = data.local_samples();
  BatchBuffers buffers(batch, data.shape().feature_numel, data.shape().seq_len);
  Calibration c;
  c.observers.resize(targets.size());
  for (std::size_t i = 0; i < targets.size(); ++i) targets[i]->set_input_observer(&c.observers[i]);
  run_agreed(comm.get(), log, [&] { forward_over(model, data, buffers, share, batch); });
  // Ranges agreed over the ranks, then (percentile, entropy) the histograms summed.
  c.lows.resize(targets.size()), c.highs.resize(targets.size());
  for (std::size_t i = 0; i < targets.size(); ++i)
    c.lows[i] = c.observers[i].min(), c.highs[i] = c.observers[i].max();
  const int count = static_cast<int>(targets.size());
  TRELLIS_MPI(MPI_Allreduce(MPI_IN_PLACE, c.lows.data(), count, MPI_FLOAT, MPI_MIN, comm.get()));
  TRELLIS_MPI(MPI_Allreduce(MPI_IN_PLACE, c.highs.data(), count, MPI_FLOAT, MPI_MAX, comm.get()));
  for (std::size_t i = 0; i < targets.size(); ++i)
    c.observers[i].start_histogram(c.lows[i], c.highs[i]);
  if (method != int8::CalibrationMethod::minmax) {
    run_agreed(comm.get(), log, [&] { forward_over(model, data, buffers, share, batch); });
    for (int8::ActivationObserver& o : c.observers)
      TRELLIS_MPI(MPI_Allreduce(MPI_IN_PLACE, o.histogram().data(), int8::ActivationObserver::kBins,
                                MPI_DOUBLE, MPI_SUM, comm.get()));
  }
  for (nn::Layer* layer : targets) layer->set_input_observer(nullptr);
  return c;
}

// The int8 form of every target, its input scales chosen from the calibration and a
// convolution's BatchNorm folded in; one log line per layer.
std::vector<int8::Int8Layer> quantize_targets(nn::Model& model, const nn::ParameterStore& store,
                                              const std::vector<nn::Layer*>& targets,
                                              const Calibration& c, int8::CalibrationMethod method,
                                              double percentile, const Logger& log) {
  std::map<std::string, const nn::BatchNorm2d*> norms;
  model.for_each_layer([&](nn::Layer& layer) {
    if (const auto* norm = dynamic_cast<const nn::BatchNorm2d*>(&layer)) norms[norm->name()] = norm;
  });
  std::map<std::string, const nn::BatchNorm2d*> folds;  // the BatchNorms that fold in
  for (const auto& [conv, norm] : model.conv_batchnorm_pairs()) folds[conv] = norms.at(norm);
  std::vector<int8::Int8Layer> quantized;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const kernels::ActivationQuant input = c.observers[i].choose(method, percentile);
    const auto fold = folds.find(targets[i]->name());
    quantized.push_back(int8::quantize_layer(*targets[i], store, input,
                                             fold == folds.end() ? nullptr : fold->second));
    log.info(format_text(
        "quantize: %-28s %-16s input %s range [%.4g, %.4g], scale %.4g (clips at %.4g)%s",
        targets[i]->name().c_str(), shape_string(quantized.back().weight_shape).c_str(),
        kernels::quant_type_name(input.type), c.lows[i], c.highs[i],
        static_cast<double>(input.scale),
        static_cast<double>(input.scale) * (input.type == kernels::QuantType::u8 ? 255.0 : 127.0),
        quantized.back().folded_norm.empty()
            ? ""
            : (", " + quantized.back().folded_norm + " folded in").c_str()));
  }
  return quantized;
}

}  // namespace

std::string default_int8_path(const std::string& weights) {
  const std::string suffix = ".h5";
  const bool h5 = weights.size() > suffix.size() &&
                  weights.compare(weights.size() - suffix.size(), suffix.size(), suffix) == 0;
  return (h5 ? weights.substr(0, weights.size() - suffix.size()) : weights) + ".int8.h5";
}

void quantize_command(MPI_Comm world, const QuantizeOptions& options, const Logger& log) {
  MpiComm comm = MpiComm::duplicate(world);
  int rank = 0;
  TRELLIS_MPI(MPI_Comm_rank(comm.get(), &rank));
  TrainConfig config;
  int8::CalibrationMethod method = int8::CalibrationMethod::entropy;
  std::unique_ptr<EvalSource> data;
  run_agreed(comm.get(), log, [&] {
    method = int8::parse_calibration_method(options.method);
    if (!(options.percentile > 0 && options.percentile <= 100))
      throw ConfigError("quantize --percentile " + format_text("%g", options.percentile) +
                        ": must be in (0, 100]");
    if (options.batches < 1 || options.batch < 1)
      throw ConfigError("quantize --batches and --batch must be >= 1");
    if (is_int8_weights(options.weights))
      throw ConfigError(options.weights + " is already an int8 model; quantize its fp32 weights");
    config = saved_config(options.weights);
    // The first batches x batch samples of DATA, split over the ranks: the same samples,
    // hence the same scales, for any rank count.
    config.train.eval_max_samples = options.batches * options.batch;
    // Buffers for at most kMaxInferenceBatch samples until the batch is known to fit.
    data =
        open_eval_source(config, options.calib, comm, std::min(options.batch, kMaxInferenceBatch));
    check_inference_memory(config, data->shape(), options.batch, "quantize --batch",
                           available_memory_bytes());
    if (options.batch > kMaxInferenceBatch)
      data = open_eval_source(config, options.calib, comm, options.batch);
  });
  SavedModel saved;
  std::vector<nn::Layer*> targets;
  nn::Model* model = nullptr;
  run_agreed(comm.get(), log, [&] {
    open_saved_model(saved, options.weights, config, data->shape(), options.batch);
    model = saved.model.get();
    targets = int8::quantizable_layers(*model);
    if (targets.empty())
      throw ConfigError(options.weights + ": the model has no Linear or Conv2d layers to quantize");
  });
  const long long calibrated = data->total_samples();
  const Calibration calibration_data =
      calibrate(*model, targets, *data, method, options.batch, comm, log);
  const std::vector<int8::Int8Layer> quantized = quantize_targets(
      *model, saved.store, targets, calibration_data, method, options.percentile, log);
  const std::string calibration =
      std::string(int8::calibration_method_name(method)) +
      (method == int8::CalibrationMethod::percentile ? format_text(" %g", options.percentile)
                                                     : "") +
      format_text(" on %lld samples of ", calibrated) + options.calib;
  run_agreed(comm.get(), log, [&] {
    if (rank == 0)
      write_int8_weights(options.out, saved.store, model->buffers(), quantized, config.to_ini(),
                         calibration, read_tokenizer_json(options.weights));
  });
  log.info(format_text("quantize: %s -> %s: %zu layers int8 (%s); %lld -> %lld bytes",
                       options.weights.c_str(), options.out.c_str(), quantized.size(),
                       calibration.c_str(), static_cast<long long>(file_bytes(options.weights)),
                       static_cast<long long>(file_bytes(options.out))));
}

int run_quantize_command(const CommandContext& context, const CommandArgs& args) {
  QuantizeOptions options;
  options.weights = args.text("--weights");
  options.calib = args.text("--calib");
  options.out = args.text("--out");
  if (options.out.empty()) options.out = default_int8_path(options.weights);
  options.method = args.text("--method");
  options.percentile = args.real("--percentile");
  options.batches = args.integer("--batches");
  options.batch = args.integer("--batch");
  quantize_command(context.world, options, context.log);
  return 0;
}

}  // namespace trellis
