// The work of one training sample through a model, unit by unit (the pipeline units of
// model_registry.hpp), as the planner (train/plan/) times it: the GEMMs with their shapes, the
// attention and convolution FLOPs, the bytes the element-wise passes move, and the collectives
// the layers issue over the tensor-parallel group. Each model's registration describes its own
// work (ModelRegistration::work) from the same shapes its layers are built with; unit tests
// hold the FLOPs to the registration's flops_per_sample and the collectives to what the layers
// issue.
#pragma once

#include <cstdint>
#include <vector>

namespace trellis {

// One forward GEMM [m, k] x [k, n] per sample; backward runs two of the same size (dW, dx).
// m: rows per sample (tokens of a sequence; 1 for an MLP sample).
struct GemmWork {
  double m = 0, n = 0, k = 0;
  bool input_grad = true;  // false: the model's first layer, whose dx GEMM is left out
};

// Collectives over the tensor-parallel group per micro-batch, forward and backward together;
// each carries floats x samples + fixed_floats.
enum class TpCollective { all_reduce, all_gather, reduce_scatter };
struct TpCollectiveWork {
  TpCollective kind = TpCollective::all_reduce;
  double floats = 0;        // per sample: the message's logical size (the whole tensor)
  int calls = 1;            // per micro-batch
  int forward_calls = 0;    // of them, issued by forward (memory.recompute = full: again)
  double fixed_floats = 0;  // per call whatever the micro-batch (a norm's parameter gradients)
};

// Convolutions per sample, forward + backward, of one width (output channels): the planner
// takes the machine's convolution efficiency at that width.
struct ConvWork {
  double flops = 0;
  double channels = 0;
};

struct UnitWork {
  std::vector<GemmWork> gemms;
  double attention_flops = 0;  // forward + backward, this tp rank's heads
  double attention_head_dim = 0;
  std::vector<ConvWork> convs;
  double elementwise_floats = 0;  // forward + backward floats read and written by element-wise
                                  // passes (norms, activations, residual adds, softmax, loss)
  double recompute_floats = 0;    // of those, the forward passes a full recomputation reruns
  std::vector<TpCollectiveWork> tp_collectives;
  double params = 0;         // this tp rank's parameters
  double kernels = 0;        // kernel launches per micro-batch, forward + backward
  double output_floats = 0;  // per sample: the activations a pipeline stage ending here sends
  bool block = false;        // a unit memory.recompute = full recomputes
};

struct ModelWork {
  std::vector<UnitWork> units;  // the pipeline units, in order
  double params = 0;            // the whole model's parameters
  bool tied_table = false;      // first and last unit share a table (summed over pp stages)
  double tied_floats = 0;       // its size on one tp rank
};

// The forward + backward FLOPs of `work` (GEMMs, attention, convolutions), summed over units.
double work_flops(const ModelWork& work);
double unit_flops(const UnitWork& unit);

}  // namespace trellis
