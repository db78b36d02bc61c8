#include "trellis/parallel/pipeline_engine.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/timer.hpp"
#include "trellis/core/trace.hpp"
#include "trellis/nn/buffer_pool.hpp"

#include <string>

namespace trellis {

PipelineEngine::PipelineEngine(std::vector<std::unique_ptr<nn::Model>> replicas,
                               PipelineSchedule schedule, Communicator* pp,
                               nn::TensorParallel vocab_tp)
    : models_(std::move(replicas)), schedule_(schedule), pp_(pp) {
  TRELLIS_REQUIRE(!models_.empty(), "PipelineEngine without a model");
  stages_ = pp_ != nullptr ? pp_->size() : 1;
  stage_ = pp_ != nullptr ? pp_->rank() : 0;
  const nn::Model& m = *models_.front();
  TRELLIS_REQUIRE(m.first_stage() == (stage_ == 0) && m.last_stage() == (stage_ == stages_ - 1),
                  "pipeline stage " + std::to_string(stage_) + " of " + std::to_string(stages_) +
                      " holds a model built for another position");
  rows_per_sample_ = m.rows_per_sample();
  const std::size_t cap_rows = static_cast<std::size_t>(m.capacity()) * rows_per_sample_;
  outputs_.resize(models_.size());
  for (std::size_t s = 0; s < models_.size(); ++s) {
    if (m.last_stage())
      losses_.push_back(std::make_unique<nn::SoftmaxCrossEntropy>(
          m.local_classes(), static_cast<int>(cap_rows), m.class_offset(), m.classes(), vocab_tp));
    if (!m.first_stage())
      inputs_.push_back(
          nn::layer_buffer(nn::BufferRole::own, "trellis::pipeline::input" + std::to_string(s),
                           cap_rows * static_cast<std::size_t>(m.stage_input_width())));
  }
  if (!m.last_stage())
    output_grad_ = nn::layer_buffer(nn::BufferRole::own, "trellis::pipeline::output_grad",
                                    cap_rows * static_cast<std::size_t>(m.stage_output_width()));
}

std::size_t PipelineEngine::rows(const MicroBatch& mb) const {
  return static_cast<std::size_t>(mb.samples) * static_cast<std::size_t>(rows_per_sample_);
}

void PipelineEngine::exchange(const MicroBatch* send_out, int send_out_k,
                              const MicroBatch* send_grad, int send_grad_k,
                              const MicroBatch* recv_in, int recv_in_k, const MicroBatch* recv_grad,
                              StageTimes& times) {
  const nn::Model& m = *models_.front();
  const bool first = m.first_stage(), last = m.last_stage();
  if (last) send_out = recv_grad = nullptr;
  if (first) send_grad = recv_in = nullptr;
  if (!send_out && !send_grad && !recv_in && !recv_grad) return;
  const trace::Span span("pipeline", "pipeline p2p");
  const auto in_width = static_cast<std::size_t>(m.stage_input_width());
  const auto out_width = static_cast<std::size_t>(m.stage_output_width());
  Stopwatch watch;
  pp_->group_start();
  if (send_out)
    pp_->send(outputs_[slot(send_out_k)].data(), rows(*send_out) * out_width, stage_ + 1);
  if (send_grad)
    pp_->send(models_[slot(send_grad_k)]->stage_input_grad().data(), rows(*send_grad) * in_width,
              stage_ - 1);
  if (recv_in) pp_->recv(inputs_[slot(recv_in_k)].data(), rows(*recv_in) * in_width, stage_ - 1);
  if (recv_grad) pp_->recv(output_grad_.data(), rows(*recv_grad) * out_width, stage_ + 1);
  pp_->group_end();
  times.p2p += watch.fenced_seconds();
}

nn::ModelInput PipelineEngine::stage_input(int s, const MicroBatch& mb) const {
  nn::ModelInput input = mb.input;
  const nn::Model& m = *models_[s];
  if (!m.first_stage())
    input.activations = as_matrix(inputs_[s], static_cast<int>(rows(mb)), m.stage_input_width());
  return input;
}

void PipelineEngine::forward(int k, const MicroBatch& mb, float scale, StageSums& sums,
                             StageTimes& times) {
  const trace::Span span("compute", "forward", k, "micro_batch");
  Stopwatch watch;
  const int s = slot(k);
  nn::Model& m = *models_[s];
  outputs_[s] = m.forward(stage_input(s, mb), mb.samples, mb.ctx);
  if (m.last_stage()) {
    nn::SoftmaxCrossEntropy& loss = *losses_[s];
    const auto result = loss.forward(outputs_[s], mb.targets, static_cast<int>(rows(mb)));
    sums.loss_sum += result.loss_sum;
    sums.correct += static_cast<double>(result.correct);
    loss.backward(scale);
  }
  times.compute += watch.fenced_seconds();
}

void PipelineEngine::backward(int k, const MicroBatch& mb, StageTimes& times) {
  const trace::Span span("compute", "backward", k, "micro_batch");
  Stopwatch watch;
  const int s = slot(k);
  nn::Model& m = *models_[s];
  const ConstMatrix dout =
      m.last_stage() ? losses_[s]->input_grad()
                     : as_matrix(output_grad_, static_cast<int>(rows(mb)), m.stage_output_width());
  m.backward(dout, mb.samples);
  times.compute += watch.fenced_seconds();
}

StageSums PipelineEngine::train(const MicroBatchProvider& batches, int micro_batches, float scale,
                                GradientSync& sync, StageTimes& times) {
  const int M = micro_batches;
  TRELLIS_REQUIRE(in_flight(schedule_, stages_, stage_, M) <= slots(),
                  "pipeline: " + std::to_string(M) + " micro-batches need more slots than the " +
                      std::to_string(slots()) + " built");
  const int warmup = warmup_forwards(schedule_, stages_, stage_, M);
  const int remaining = M - warmup;
  StageSums sums;
  int f = 0, b = 0;  // next micro-batch to forward, to backward
  auto run_backward = [&](const MicroBatch& mb) {
    sync.begin_backward(b == M - 1);  // overlap the dp reduction with the stage's last one
    backward(b, mb, times);
  };
  for (int i = 0; i < warmup; ++i, ++f) {
    const MicroBatch mb = batches.micro_batch(f);
    exchange(nullptr, 0, nullptr, 0, &mb, f, nullptr, times);
    forward(f, mb, scale, sums, times);
    exchange(&mb, f, nullptr, 0, nullptr, 0, nullptr, times);
  }
  MicroBatch next;
  if (remaining > 0) {
    next = batches.micro_batch(f);
    exchange(nullptr, 0, nullptr, 0, &next, f, nullptr, times);
  }
  for (int i = 0; i < remaining; ++i, ++b) {
    const MicroBatch fwd = next;
    forward(f, fwd, scale, sums, times);
    const MicroBatch bwd = batches.micro_batch(b);
    exchange(&fwd, f, nullptr, 0, nullptr, 0, &bwd, times);  // send forward, recv backward
    ++f;
    run_backward(bwd);
    if (i == remaining - 1) {
      exchange(nullptr, 0, &bwd, b, nullptr, 0, nullptr, times);
    } else {
      next = batches.micro_batch(f);
      exchange(nullptr, 0, &bwd, b, &next, f, nullptr, times);  // send backward, recv forward
    }
  }
  for (int i = 0; i < warmup; ++i, ++b) {
    const MicroBatch bwd = batches.micro_batch(b);
    exchange(nullptr, 0, nullptr, 0, nullptr, 0, &bwd, times);
    run_backward(bwd);
    exchange(nullptr, 0, &bwd, b, nullptr, 0, nullptr, times);
  }
  return sums;
}

StageSums PipelineEngine::evaluate(const MicroBatch& mb) {
  StageTimes ignored;
  StageSums sums;
  exchange(nullptr, 0, nullptr, 0, &mb, 0, nullptr, ignored);
  const int s = slot(0);
  nn::Model& m = *models_[s];
  outputs_[s] = m.forward(stage_input(s, mb), mb.samples, mb.ctx);
  if (m.last_stage()) {
    const auto result = losses_[s]->forward(outputs_[s], mb.targets, static_cast<int>(rows(mb)));
    sums.loss_sum = result.loss_sum;
    sums.correct = static_cast<double>(result.correct);
  }
  exchange(&mb, 0, nullptr, 0, nullptr, 0, nullptr, ignored);
  return sums;
}

}  // namespace trellis
