// A machine type the planner can rent or use (`trellis plan --cluster FILE`): its devices, their
// speed per kernel class, the links between them, prices and spot interruptions. A cluster file
// is an INI file with one section per machine type (inputs/clusters/*.ini;
// docs/planning.md lists the keys); `trellis plan --calibrate` measures this machine and
// writes one such section.
#pragma once

#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

namespace trellis {

struct LinkSpec {
  double bandwidth_gbs = 0;  // GB/s per device, one direction
  double latency_us = 0;     // per message
};

// Hours of the day [start_hour, end_hour) (UTC; end may wrap past midnight) when the price is
// multiplied by `multiplier` (off-peak rates, the scheduled training of the planning docs).
struct PriceWindow {
  int start_hour = 0, end_hour = 0;
  double multiplier = 1;
};

// A kernel class's achieved fraction of the device's peak by the GEMM's smallest dimension:
// (dimension, fraction) pairs, dimensions ascending, interpolated in log(dimension).
using EfficiencyCurve = std::vector<std::pair<double, double>>;

struct MachineType {
  std::string name, description;
  int devices_per_node = 1;
  double device_memory_gib = 0;
  double peak_tflops_fp32 = 0, peak_tflops_bf16 = 0, peak_tflops_fp16 = 0;
  EfficiencyCurve gemm_efficiency_fp32, gemm_efficiency_bf16;
  // The attention kernels' fraction of the peak by head dimension (one value: every head dim).
  EfficiencyCurve attention_efficiency_fp32, attention_efficiency_bf16;
  // 3x3 convolutions (forward, weight and input gradients) by channel count; a machine type
  // without them takes the GEMM curve at the channel count.
  EfficiencyCurve conv_efficiency_fp32, conv_efficiency_bf16;
  // Element-wise kernels, achieved, per device: the bytes the model's work counts
  // (model_work.hpp) over the time the norm, activation and residual kernels take.
  double memory_bandwidth_gbs = 0;
  LinkSpec intra_node, inter_node;
  double checkpoint_bandwidth_gbs = 0;  // per node, to the checkpoint file system
  double price_per_device_hour = 0;
  double spot_price_per_device_hour = 0;  // 0: no spot offering
  double spot_mtbi_hours = 0;             // one node's mean time between interruptions
  double restart_minutes = 0;             // interruption to training again, load excluded
  int min_nodes = 1, max_nodes = 1;
  std::vector<PriceWindow> price_windows;
  bool calibrated = false;  // the efficiencies were measured on this hardware
  // device_kind = cpu: each rank is a core of a host build (dp gradients summed in node shared
  // memory, precision.kernels = auto as this build resolves it); gpu otherwise.
  bool cpu_ranks = false;
  // Fraction of the data-parallel gradient exchange hidden behind backward (0: none, as on
  // CPU ranks that have no spare core to progress it).
  double comm_overlap = 0;
  // device_kind = cpu: the logical CPUs the node's ranks run on, where fewer than its ranks
  // (they take turns: a rank waiting in the pipeline bubble lends its CPU to the others, see
  // step_time.hpp); 0: a CPU or a device per rank.
  int cpus_per_node = 0;
  // Fixed cost of one kernel launch in microseconds (GPUs: the launch and its gap), which
  // small micro-batches pay more often.
  double kernel_launch_us = 0;

  bool has_spot() const { return spot_price_per_device_hour > 0 && spot_mtbi_hours > 0; }
  double peak_tflops(const std::string& precision) const;  // "fp32" | "bf16" | "fp16"
  // Achieved fraction of the peak for a GEMM whose smallest dimension is `min_dim`.
  double gemm_efficiency(const std::string& precision, double min_dim) const;
  double attention_efficiency(const std::string& precision, double head_dim) const;
  double conv_efficiency(const std::string& precision, double channels) const;
  // The price multiplier at hour-of-day `hour` (0..23, UTC).
  double price_multiplier(int hour) const;
};

// Every machine type in `path`; ConfigError naming the file, section and key for a missing or
// bad value, an unknown key (with the closest known one) or a file with no section.
std::vector<MachineType> read_cluster_file(const std::string& path);
// The same from INI text (`source` names it in errors).
std::vector<MachineType> parse_cluster_text(const std::string& text, const std::string& source);
// One section that read_cluster_file reads back as `machine`.
void write_machine_type(std::ostream& out, const MachineType& machine);

}  // namespace trellis
