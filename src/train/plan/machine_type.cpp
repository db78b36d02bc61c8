#include "trellis/train/plan/machine_type.hpp"

#include "trellis/core/closest_name.hpp"
#include "trellis/core/error.hpp"
#include "trellis/core/format.hpp"

#include <boost/program_options.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

namespace trellis {

namespace po = boost::program_options;

double MachineType::peak_tflops(const std::string& precision) const {
  if (precision == "bf16") return peak_tflops_bf16;
  if (precision == "fp16") return peak_tflops_fp16;
  return peak_tflops_fp32;
}

double MachineType::gemm_efficiency(const std::string& precision, double min_dim) const {
  const EfficiencyCurve& curve = precision == "fp32" ? gemm_efficiency_fp32 : gemm_efficiency_bf16;
  if (curve.empty()) return 0.5;
  if (min_dim <= curve.front().first) return curve.front().second * min_dim / curve.front().first;
  for (std::size_t i = 1; i < curve.size(); ++i) {
    if (min_dim > curve[i].first) continue;
    const auto& [d0, e0] = curve[i - 1];
    const auto& [d1, e1] = curve[i];
    const double t = std::log(min_dim / d0) / std::log(d1 / d0);
    return e0 + t * (e1 - e0);
  }
  return curve.back().second;
}

namespace {

// The curve at `x`, interpolated in log(x), flat beyond its ends.
double flat_ended(const EfficiencyCurve& curve, double x) {
  if (x <= curve.front().first) return curve.front().second;
  for (std::size_t i = 1; i < curve.size(); ++i) {
    if (x > curve[i].first) continue;
    const auto& [d0, e0] = curve[i - 1];
    const auto& [d1, e1] = curve[i];
    return e0 + std::log(x / d0) / std::log(d1 / d0) * (e1 - e0);
  }
  return curve.back().second;
}

}  // namespace

double MachineType::conv_efficiency(const std::string& precision, double channels) const {
  const EfficiencyCurve& curve = precision == "fp32" ? conv_efficiency_fp32 : conv_efficiency_bf16;
  return curve.empty() ? gemm_efficiency(precision, channels) : flat_ended(curve, channels);
}

double MachineType::attention_efficiency(const std::string& precision, double head_dim) const {
  const EfficiencyCurve& curve =
      precision == "fp32" ? attention_efficiency_fp32 : attention_efficiency_bf16;
  return curve.empty() ? 0.5 : flat_ended(curve, head_dim);
}

double MachineType::price_multiplier(int hour) const {
  for (const PriceWindow& w : price_windows) {
    const bool inside = w.start_hour <= w.end_hour ? hour >= w.start_hour && hour < w.end_hour
                                                   : hour >= w.start_hour || hour < w.end_hour;
    if (inside) return w.multiplier;
  }
  return 1;
}

namespace {

struct Field {
  const char* key;
  bool required;
  std::function<void(MachineType&, const std::string&, const std::string& where)> set;
};

double number(const std::string& text, const std::string& where, double minimum) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !std::isfinite(value) || value < minimum)
    throw ConfigError(where + " = '" + text +
                      "': expected a number >= " + format_text("%g", minimum));
  return value;
}

int integer(const std::string& text, const std::string& where, int minimum) {
  const double value = number(text, where, minimum);
  if (value != std::floor(value) || value > 1e9)
    throw ConfigError(where + " = '" + text +
                      "': expected a whole number >= " + std::to_string(minimum));
  return static_cast<int>(value);
}

// The attention's fraction is of its nominal FLOPs (full attention, 12 T d per token, the
// count MFU uses); the causal kernels skip the tiles above the diagonal, almost half of them,
// so a fast kernel can reach up to twice the peak on that count.
constexpr double kMaxAttentionFraction = 2.0;

EfficiencyCurve curve(const std::string& text, const std::string& where,
                      double max_fraction = 1.0) {
  EfficiencyCurve out;
  const std::string above = max_fraction == 1.0 ? "1" : format_text("%g", max_fraction);
  if (text.find(':') == std::string::npos) {  // one fraction for every size
    const double fraction = number(text, where, 1e-6);
    if (fraction > max_fraction)
      throw ConfigError(where + " = " + text + ": a fraction above " + above);
    return {{1, fraction}};
  }
  std::istringstream in(text);
  std::string pair;
  while (in >> pair) {
    const std::size_t colon = pair.find(':');
    if (colon == std::string::npos)
      throw ConfigError(where + ": '" + pair + "' is not DIM:FRACTION (e.g. 256:0.5)");
    const double dim = number(pair.substr(0, colon), where + " (dimension)", 1);
    const double fraction = number(pair.substr(colon + 1), where + " (fraction)", 0);
    if (fraction > max_fraction)
      throw ConfigError(where + ": fraction " + pair + " is above " + above);
    if (!out.empty() && dim <= out.back().first)
      throw ConfigError(where + ": dimensions must ascend ('" + text + "')");
    out.emplace_back(dim, fraction);
  }
  if (out.empty())
    throw ConfigError(where + ": expected DIM:FRACTION pairs, e.g. 256:0.5 1024:0.7");
  return out;
}

std::vector<PriceWindow> windows(const std::string& text, const std::string& where) {
  std::vector<PriceWindow> out;
  std::istringstream in(text);
  std::string item;
  while (in >> item) {
    const std::size_t dash = item.find('-'), colon = item.find(':');
    if (dash == std::string::npos || colon == std::string::npos || colon < dash)
      throw ConfigError(where + ": '" + item + "' is not START-END:MULTIPLIER (e.g. 22-6:0.7)");
    PriceWindow w;
    w.start_hour = integer(item.substr(0, dash), where + " (start hour)", 0);
    w.end_hour = integer(item.substr(dash + 1, colon - dash - 1), where + " (end hour)", 0);
    w.multiplier = number(item.substr(colon + 1), where + " (multiplier)", 0);
    if (w.start_hour > 23 || w.end_hour > 24 || w.start_hour == w.end_hour)
      throw ConfigError(where + ": '" + item + "' needs hours 0-24 with start != end");
    out.push_back(w);
  }
  return out;
}

bool boolean(const std::string& text, const std::string& where) {
  if (text == "true") return true;
  if (text == "false") return false;
  throw ConfigError(where + " = '" + text + "': expected true or false");
}

template <class T>
std::function<void(MachineType&, const std::string&, const std::string&)> real(T MachineType::*m,
                                                                               double minimum) {
  return [m, minimum](MachineType& t, const std::string& v, const std::string& w) {
    t.*m = number(v, w, minimum);
  };
}

const std::vector<Field>& fields() {
  using M = MachineType;
  static const std::vector<Field> table = {
      {"description", false,
       [](M& t, const std::string& v, const std::string&) { t.description = v; }},
      {"devices_per_node", true,
       [](M& t, const std::string& v, const std::string& w) {
         t.devices_per_node = integer(v, w, 1);
       }},
      {"device_memory_gib", true, real(&M::device_memory_gib, 0.001)},
      {"peak_tflops_fp32", true, real(&M::peak_tflops_fp32, 1e-6)},
      {"peak_tflops_bf16", true, real(&M::peak_tflops_bf16, 0)},
      {"peak_tflops_fp16", false, real(&M::peak_tflops_fp16, 0)},
      {"gemm_efficiency_fp32", true,
       [](M& t, const std::string& v, const std::string& w) {
         t.gemm_efficiency_fp32 = curve(v, w);
       }},
      {"gemm_efficiency_bf16", false,
       [](M& t, const std::string& v, const std::string& w) {
         t.gemm_efficiency_bf16 = curve(v, w);
       }},
      {"attention_efficiency_fp32", true,
       [](M& t, const std::string& v, const std::string& w) {
         t.attention_efficiency_fp32 = curve(v, w, kMaxAttentionFraction);
       }},
      {"conv_efficiency_fp32", false,
       [](M& t, const std::string& v, const std::string& w) {
         t.conv_efficiency_fp32 = curve(v, w);
       }},
      {"conv_efficiency_bf16", false,
       [](M& t, const std::string& v, const std::string& w) {
         t.conv_efficiency_bf16 = curve(v, w);
       }},
      {"attention_efficiency_bf16", false,
       [](M& t, const std::string& v, const std::string& w) {
         t.attention_efficiency_bf16 = curve(v, w, kMaxAttentionFraction);
       }},
      {"memory_bandwidth_gbs", true, real(&M::memory_bandwidth_gbs, 1e-6)},
      {"intra_node_bandwidth_gbs", true,
       [](M& t, const std::string& v, const std::string& w) {
         t.intra_node.bandwidth_gbs = number(v, w, 1e-6);
       }},
      {"intra_node_latency_us", true,
       [](M& t, const std::string& v, const std::string& w) {
         t.intra_node.latency_us = number(v, w, 0);
       }},
      {"inter_node_bandwidth_gbs", true,
       [](M& t, const std::string& v, const std::string& w) {
         t.inter_node.bandwidth_gbs = number(v, w, 1e-6);
       }},
      {"inter_node_latency_us", true,
       [](M& t, const std::string& v, const std::string& w) {
         t.inter_node.latency_us = number(v, w, 0);
       }},
      {"checkpoint_bandwidth_gbs", true, real(&M::checkpoint_bandwidth_gbs, 1e-6)},
      {"price_per_device_hour", true, real(&M::price_per_device_hour, 0)},
      {"spot_price_per_device_hour", false, real(&M::spot_price_per_device_hour, 0)},
      {"spot_mtbi_hours", false, real(&M::spot_mtbi_hours, 0)},
      {"restart_minutes", false, real(&M::restart_minutes, 0)},
      {"min_nodes", false,
       [](M& t, const std::string& v, const std::string& w) { t.min_nodes = integer(v, w, 1); }},
      {"max_nodes", true,
       [](M& t, const std::string& v, const std::string& w) { t.max_nodes = integer(v, w, 1); }},
      {"price_windows", false,
       [](M& t, const std::string& v, const std::string& w) { t.price_windows = windows(v, w); }},
      {"calibrated", false,
       [](M& t, const std::string& v, const std::string& w) { t.calibrated = boolean(v, w); }},
      {"comm_overlap", false, real(&M::comm_overlap, 0)},
      {"kernel_launch_us", false, real(&M::kernel_launch_us, 0)},
      {"cpus_per_node", false,
       [](M& t, const std::string& v, const std::string& w) {
         t.cpus_per_node = integer(v, w, 0);
       }},
      {"device_kind", false,
       [](M& t, const std::string& v, const std::string& w) {
         if (v != "cpu" && v != "gpu") throw ConfigError(w + " = '" + v + "': expected cpu or gpu");
         t.cpu_ranks = v == "cpu";
       }},
  };
  return table;
}

}  // namespace

std::vector<MachineType> parse_cluster_text(const std::string& text, const std::string& source) {
  std::istringstream in(text);
  po::parsed_options parsed(nullptr);
  try {
    parsed = po::parse_config_file(in, po::options_description(), true);
  } catch (const po::error& e) {
    throw ConfigError(source + ": " + e.what());
  }
  std::vector<std::string> order;
  std::map<std::string, std::map<std::string, std::string>> sections;
  std::vector<std::string> known;
  for (const Field& f : fields()) known.push_back(f.key);
  for (const po::option& o : parsed.options) {
    const std::size_t dot = o.string_key.rfind('.');
    if (dot == std::string::npos)
      throw ConfigError(source + ": key '" + o.string_key + "' outside a [machine-type] section");
    const std::string section = o.string_key.substr(0, dot), key = o.string_key.substr(dot + 1);
    if (std::find(known.begin(), known.end(), key) == known.end())
      throw ConfigError(source + ": [" + section + "] unknown key '" + key + "' (did you mean '" +
                        closest_name(key, known) + "'?)");
    if (!sections.count(section)) order.push_back(section);
    if (!sections[section].emplace(key, o.value.empty() ? "" : o.value[0]).second)
      throw ConfigError(source + ": [" + section + "] key '" + key + "' given twice");
  }
  if (order.empty()) throw ConfigError(source + ": no [machine-type] section");
  std::vector<MachineType> machines;
  for (const std::string& name : order) {
    MachineType m;
    m.name = name;
    for (const Field& f : fields()) {
      const std::string where = source + ": [" + name + "] " + f.key;
      const auto it = sections[name].find(f.key);
      if (it == sections[name].end()) {
        if (f.required) throw ConfigError(where + " is missing");
        continue;
      }
      f.set(m, it->second, where);
    }
    if (m.min_nodes > m.max_nodes)
      throw ConfigError(source + ": [" + name + "] min_nodes " + std::to_string(m.min_nodes) +
                        " is above max_nodes " + std::to_string(m.max_nodes));
    if (m.comm_overlap > 1)
      throw ConfigError(source + ": [" + name + "] comm_overlap must be within [0, 1]");
    if (m.gemm_efficiency_bf16.empty()) m.gemm_efficiency_bf16 = m.gemm_efficiency_fp32;
    if (m.attention_efficiency_bf16.empty())
      m.attention_efficiency_bf16 = m.attention_efficiency_fp32;
    if (m.conv_efficiency_bf16.empty()) m.conv_efficiency_bf16 = m.conv_efficiency_fp32;
    if (m.peak_tflops_bf16 <= 0) m.peak_tflops_bf16 = m.peak_tflops_fp32;
    if (m.peak_tflops_fp16 <= 0) m.peak_tflops_fp16 = m.peak_tflops_bf16;
    machines.push_back(m);
  }
  return machines;
}

std::vector<MachineType> read_cluster_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError("cluster file " + path + ": cannot be opened");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_cluster_text(text.str(), "cluster file " + path);
}

namespace {

std::string curve_text(const EfficiencyCurve& curve) {
  std::string out;
  for (const auto& [dim, fraction] : curve)
    out += (out.empty() ? "" : " ") + format_text("%g:%.3f", dim, fraction);
  return out;
}

}  // namespace

void write_machine_type(std::ostream& out, const MachineType& m) {
  out << "[" << m.name << "]\n";
  out << "device_kind = " << (m.cpu_ranks ? "cpu" : "gpu") << "\n";
  if (!m.description.empty()) out << "description = " << m.description << "\n";
  out << "devices_per_node = " << m.devices_per_node << "\n"
      << "device_memory_gib = " << format_text("%g", m.device_memory_gib) << "\n"
      << "peak_tflops_fp32 = " << format_text("%.4g", m.peak_tflops_fp32) << "\n"
      << "peak_tflops_bf16 = " << format_text("%.4g", m.peak_tflops_bf16) << "\n"
      << "peak_tflops_fp16 = " << format_text("%.4g", m.peak_tflops_fp16) << "\n"
      << "gemm_efficiency_fp32 = " << curve_text(m.gemm_efficiency_fp32) << "\n"
      << "gemm_efficiency_bf16 = " << curve_text(m.gemm_efficiency_bf16) << "\n"
      << "attention_efficiency_fp32 = " << curve_text(m.attention_efficiency_fp32) << "\n"
      << "attention_efficiency_bf16 = " << curve_text(m.attention_efficiency_bf16) << "\n"
      << "memory_bandwidth_gbs = " << format_text("%.4g", m.memory_bandwidth_gbs) << "\n"
      << "intra_node_bandwidth_gbs = " << format_text("%.4g", m.intra_node.bandwidth_gbs) << "\n"
      << "intra_node_latency_us = " << format_text("%.3g", m.intra_node.latency_us) << "\n"
      << "inter_node_bandwidth_gbs = " << format_text("%.4g", m.inter_node.bandwidth_gbs) << "\n"
      << "inter_node_latency_us = " << format_text("%.3g", m.inter_node.latency_us) << "\n"
      << "checkpoint_bandwidth_gbs = " << format_text("%.4g", m.checkpoint_bandwidth_gbs) << "\n"
      << "price_per_device_hour = " << format_text("%g", m.price_per_device_hour) << "\n"
      << "spot_price_per_device_hour = " << format_text("%g", m.spot_price_per_device_hour) << "\n"
      << "spot_mtbi_hours = " << format_text("%g", m.spot_mtbi_hours) << "\n"
      << "restart_minutes = " << format_text("%g", m.restart_minutes) << "\n"
      << "min_nodes = " << m.min_nodes << "\n"
      << "max_nodes = " << m.max_nodes << "\n"
      << "comm_overlap = " << format_text("%g", m.comm_overlap) << "\n"
      << "kernel_launch_us = " << format_text("%g", m.kernel_launch_us) << "\n"
      << "calibrated = " << (m.calibrated ? "true" : "false") << "\n";
  if (m.cpus_per_node > 0) out << "cpus_per_node = " << m.cpus_per_node << "\n";
  if (!m.conv_efficiency_fp32.empty())
    out << "conv_efficiency_fp32 = " << curve_text(m.conv_efficiency_fp32) << "\n"
        << "conv_efficiency_bf16 = " << curve_text(m.conv_efficiency_bf16) << "\n";
  if (!m.price_windows.empty()) {
    out << "price_windows =";
    for (const PriceWindow& w : m.price_windows)
      out << " " << w.start_hour << "-" << w.end_hour << ":" << format_text("%g", w.multiplier);
    out << "\n";
  }
}

}  // namespace trellis
