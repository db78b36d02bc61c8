// TensorBoard event files in the run directory (a MetricsSink, metrics_sink.hpp).
#pragma once

#include "trellis/core/log.hpp"
#include "trellis/train/monitoring/metrics_sink.hpp"
#include "trellis/train/monitoring/tensorboard.hpp"

#include <cstdint>
#include <string>

namespace trellis {
// events.out.tfevents.* in run.dir. A fresh (not resumed) run first moves the event files of
// an earlier run in the same directory into run.dir/previous-runs/<n>/, so TensorBoard shows
// that run separately instead of overlaying the two.
class TensorBoardSink : public MetricsSink {
 public:
  TensorBoardSink(const std::string& run_dir, bool resumed, const std::string& config_ini,
                  std::int64_t step, const Logger& log);
  void interval(const IntervalReport& r) override;
  void evaluation(const EvalReport& r) override;
  void sparsity(const SparsityReport& r) override;

 private:
  TensorBoardWriter writer_;
};

}  // namespace trellis
