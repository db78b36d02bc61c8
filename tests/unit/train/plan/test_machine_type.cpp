// Cluster files: the shipped examples read, every error names the file, section and key, and a
// written machine type reads back as itself.
#include "catch.hpp"

#include "trellis/core/error.hpp"
#include "trellis/train/plan/machine_type.hpp"

#include <cstdlib>
#include <sstream>
#include <string>

using namespace trellis;

namespace {

std::string source_root() {
  const char* src = std::getenv("TRELLIS_SRC");
  const std::string here = __FILE__;
  return src != nullptr && *src != '\0' ? src : here.substr(0, here.rfind("/tests/"));
}

const char* kMinimal =
    "[box]\n"
    "devices_per_node = 4\n"
    "device_memory_gib = 16\n"
    "peak_tflops_fp32 = 10\n"
    "peak_tflops_bf16 = 80\n"
    "gemm_efficiency_fp32 = 64:0.2 1024:0.8\n"
    "attention_efficiency_fp32 = 0.5\n"
    "memory_bandwidth_gbs = 1000\n"
    "intra_node_bandwidth_gbs = 100\n"
    "intra_node_latency_us = 2\n"
    "inter_node_bandwidth_gbs = 10\n"
    "inter_node_latency_us = 10\n"
    "checkpoint_bandwidth_gbs = 1\n"
    "price_per_device_hour = 2\n"
    "max_nodes = 4\n";

std::string error_of(const std::string& text) {
  try {
    parse_cluster_text(text, "cluster file x.ini");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("the shipped cluster files read", "[plan]") {
  for (const char* file : {"onprem.ini", "cloud.ini", "cpu_node.ini"}) {
    INFO(file);
    const auto machines = read_cluster_file(source_root() + "/inputs/clusters/" + file);
    REQUIRE(!machines.empty());
    for (const MachineType& m : machines) {
      CHECK(m.peak_tflops_fp32 > 0);
      CHECK(m.device_memory_gib > 0);
      CHECK(m.max_nodes >= m.min_nodes);
    }
  }
}

TEST_CASE("a minimal machine type: defaults and curves", "[plan]") {
  const auto machines = parse_cluster_text(kMinimal, "x.ini");
  REQUIRE(machines.size() == 1);
  const MachineType& m = machines[0];
  CHECK(m.name == "box");
  CHECK(!m.has_spot());
  CHECK(m.peak_tflops("fp16") == 80);  // fp16 defaults to bf16's peak
  // Interpolated in log(dimension): 256 lies halfway between 64 and 1024.
  CHECK(m.gemm_efficiency("fp32", 256) == Approx(0.5));
  CHECK(m.gemm_efficiency("fp32", 4096) == Approx(0.8));
  CHECK(m.gemm_efficiency("fp32", 32) == Approx(0.1));   // below the curve: proportional
  CHECK(m.gemm_efficiency("bf16", 256) == Approx(0.5));  // bf16 defaults to fp32's curve
  CHECK(m.attention_efficiency("bf16", 64) == Approx(0.5));
  CHECK(m.price_multiplier(3) == 1);
}

TEST_CASE("price windows wrap past midnight", "[plan]") {
  const auto m =
      parse_cluster_text(std::string(kMinimal) + "price_windows = 22-6:0.5 12-13:2\n", "x.ini")[0];
  CHECK(m.price_multiplier(23) == 0.5);
  CHECK(m.price_multiplier(0) == 0.5);
  CHECK(m.price_multiplier(5) == 0.5);
  CHECK(m.price_multiplier(6) == 1);
  CHECK(m.price_multiplier(12) == 2);
}

TEST_CASE("cluster file errors name the file, the section and the key", "[plan]") {
  std::string text = kMinimal;
  CHECK_THAT(error_of(text.substr(0, text.find("max_nodes"))),
             Catch::Contains("x.ini: [box] max_nodes is missing"));
  CHECK_THAT(error_of(text + "peak_tflop_fp16 = 3\n"),
             Catch::Contains("unknown key 'peak_tflop_fp16' (did you mean 'peak_tflops_fp16'?)"));
  std::string bad = text;
  bad.replace(bad.find("= 10\npeak_tflops_bf16"), 4, "= ten");
  CHECK_THAT(error_of(bad), Catch::Contains("[box] peak_tflops_fp32 = 'ten': expected a number"));
  CHECK_THAT(error_of(text + "gemm_efficiency_bf16 = 256:0.5 64:0.2\n"),
             Catch::Contains("dimensions must ascend"));
  CHECK_THAT(error_of(text + "price_windows = 22:0.5\n"), Catch::Contains("START-END:MULTIPLIER"));
  // A GEMM reaches at most the peak; causal attention, counted on full attention's FLOPs, up
  // to twice it (a calibration measured 1.02 at head dim 128 on an AVX2 host).
  CHECK_THAT(error_of(text + "gemm_efficiency_bf16 = 64:0.5 256:1.2\n"),
             Catch::Contains("fraction 256:1.2 is above 1"));
  CHECK(parse_cluster_text(text + "attention_efficiency_bf16 = 64:0.8 128:1.2\n", "x.ini")[0]
            .attention_efficiency("bf16", 128) == Approx(1.2));
  CHECK_THAT(error_of(text + "attention_efficiency_bf16 = 2.5\n"),
             Catch::Contains("a fraction above 2"));
  CHECK_THAT(error_of(text + "min_nodes = 8\n"),
             Catch::Contains("min_nodes 8 is above max_nodes 4"));
  CHECK_THAT(error_of("devices_per_node = 1\n"),
             Catch::Contains("outside a [machine-type] section"));
  CHECK_THAT(error_of("# nothing\n"), Catch::Contains("no [machine-type] section"));
  CHECK_THAT(error_of(text + "device_kind = tpu\n"), Catch::Contains("expected cpu or gpu"));
  CHECK_THROWS_AS(read_cluster_file("/nonexistent/cluster.ini"), ConfigError);
}

TEST_CASE("a written machine type reads back as itself", "[plan]") {
  MachineType m = parse_cluster_text(std::string(kMinimal) +
                                         "price_windows = 22-6:0.5\n"
                                         "spot_price_per_device_hour = 0.7\nspot_mtbi_hours = 12\n"
                                         "device_kind = cpu\ncomm_overlap = 0.5\n"
                                         "cpus_per_node = 3\n",
                                     "x.ini")[0];
  m.calibrated = true;
  std::ostringstream out;
  write_machine_type(out, m);
  const MachineType back = parse_cluster_text(out.str(), "written")[0];
  CHECK(back.name == m.name);
  CHECK(back.devices_per_node == m.devices_per_node);
  CHECK(back.gemm_efficiency_fp32 == m.gemm_efficiency_fp32);
  CHECK(back.attention_efficiency("fp32", 64) == Approx(0.5));
  CHECK(back.price_windows.size() == 1);
  CHECK(back.has_spot());
  CHECK(back.cpu_ranks);
  CHECK(back.calibrated);
  CHECK(back.comm_overlap == Approx(0.5));
  CHECK(back.cpus_per_node == 3);
}
