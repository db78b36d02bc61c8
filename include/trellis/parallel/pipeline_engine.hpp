// PipelineEngine: runs one stage's share of an optimizer step: the forward and backward passes
// of every micro-batch in the order of the schedule (pipeline_schedule.hpp), with activations
// sent to the next stage and their gradients sent back, point to point over the pp axis.
// With one stage it is the plain micro-batch loop (forward, loss, backward per micro-batch).
//
// Micro-batches in flight each need their own activations, so the stage's model is built once
// per slot (ParameterStore replicas: one set of parameters and gradients, in_flight() copies
// of the layers' buffers); micro-batch k runs in slot k mod slots. The last stage keeps one
// loss per slot (its dlogits wait for that micro-batch's backward).
//
// Transfers follow Megatron-LM's non-interleaved 1F1B (GPipe is its all-warm-up case): every
// exchange is one Communicator group (send the output and receive what the next pass needs
// at once), so neighbouring stages never wait on each other in a cycle. An exchange moves any
// of (see exchange()):
//   input        prev -> this   activations [n rows, input width]
//   output       this -> next   the stage output
//   output grad  next -> this   its gradient
//   input grad   this -> prev   the gradient of this stage's input
// Message sizes follow from the micro-batch sizes, which every stage knows (the same data
// source on every stage of a dp rank), so nothing but the tensors travels.
#pragma once

#include "trellis/comm/communicator.hpp"
#include "trellis/nn/model.hpp"
#include "trellis/nn/softmax_xent.hpp"
#include "trellis/nn/tensor_parallel.hpp"
#include "trellis/parallel/gradient_sync.hpp"
#include "trellis/parallel/pipeline_schedule.hpp"

#include <memory>
#include <vector>

namespace trellis {

struct MicroBatch {
  nn::ModelInput input;          // first stage: the micro-batch's features or tokens
  kernels::ConstLabels targets;  // last stage: [samples * rows_per_sample]
  int samples = 0;               // may be 0 (an empty share of a partial batch)
  nn::StepContext ctx;
};

class MicroBatchProvider {
 public:
  virtual ~MicroBatchProvider() = default;
  virtual MicroBatch micro_batch(int k) const = 0;
};

struct StageSums {
  double loss_sum = 0;  // last stage only; 0 elsewhere
  double correct = 0;
};

struct StageTimes {
  double compute = 0;  // forward, loss and backward passes (fenced)
  double p2p = 0;      // waiting for and moving activations: the bubble plus transfers
};

class PipelineEngine {
 public:
  // replicas: the stage's model built in_flight() times over one ParameterStore (slot 0 the
  // original). pp: the pipeline axis, or nullptr for one stage. vocab_tp: the tp group when
  // the logits are vocabulary-parallel, else none.
  PipelineEngine(std::vector<std::unique_ptr<nn::Model>> replicas, PipelineSchedule schedule,
                 Communicator* pp, nn::TensorParallel vocab_tp);

  // One step's forward and backward over micro_batches micro-batches: loss scaled by `scale`,
  // parameter gradients accumulated in the store; sync.begin_backward() arms the overlapped
  // dp reduction for the stage's last backward.
  StageSums train(const MicroBatchProvider& batches, int micro_batches, float scale,
                  GradientSync& sync, StageTimes& times);
  // Forward only (evaluation): the loss on the last stage; others return zeros.
  StageSums evaluate(const MicroBatch& batch);

  int stages() const { return stages_; }
  int stage() const { return stage_; }
  int slots() const { return static_cast<int>(models_.size()); }
  nn::Model& model(int slot = 0) { return *models_.at(static_cast<std::size_t>(slot)); }

 private:
  void forward(int k, const MicroBatch& mb, float scale, StageSums& sums, StageTimes& times);
  void backward(int k, const MicroBatch& mb, StageTimes& times);
  // One group: optionally send slot k's output forward / its input gradient backward, and
  // optionally receive micro-batch r's input (recv_input) or output gradient (recv_grad).
  void exchange(const MicroBatch* send_out, int send_out_k, const MicroBatch* send_grad,
                int send_grad_k, const MicroBatch* recv_in, int recv_in_k,
                const MicroBatch* recv_grad, StageTimes& times);
  std::size_t rows(const MicroBatch& mb) const;
  // The model input of slot s: the micro-batch's (first stage) or the received activations.
  nn::ModelInput stage_input(int s, const MicroBatch& mb) const;
  int slot(int k) const { return k % slots(); }

  std::vector<std::unique_ptr<nn::Model>> models_;
  std::vector<std::unique_ptr<nn::SoftmaxCrossEntropy>> losses_;  // last stage, per slot
  PipelineSchedule schedule_;
  Communicator* pp_;
  int stages_ = 1, stage_ = 0;
  int rows_per_sample_ = 1;
  std::vector<FloatView> inputs_;     // non-first stages, per slot: [capacity rows * in width]
  FloatView output_grad_;             // non-last stages: [capacity rows * out width]
  std::vector<ConstMatrix> outputs_;  // per slot: the last forward's output window
};

}  // namespace trellis
