#include "trellis/train/monitoring/trace_writer.hpp"

#include "trellis/comm/mpi_check.hpp"
#include "trellis/core/durable_file.hpp"
#include "trellis/core/error.hpp"
#include "trellis/core/trace.hpp"

#include <cstdio>
#include <filesystem>
#include <sstream>
#include <vector>

namespace trellis {

namespace {

// JSON string contents: the names are literals and thread names, but escape what JSON needs.
std::string escaped(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out;
}

// This rank's events and track names as comma-separated trace-event objects (pid = rank).
std::string rank_events(int rank, const GridCoords& coords) {
  std::ostringstream out;
  char number[64];
  out << "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" << rank << ",\"args\":{\"name\":\"rank "
      << rank << " (dp " << coords.dp << ", tp " << coords.tp << ", pp " << coords.pp << ")\"}},"
      << "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":" << rank
      << ",\"args\":{\"sort_index\":" << rank << "}}";
  const std::vector<std::string> names = trace::thread_names();
  for (std::size_t t = 0; t < names.size(); ++t)
    out << ",{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" << rank << ",\"tid\":" << t
        << ",\"args\":{\"name\":\"" << escaped(names[t]) << "\"}}";
  const auto args = [&](const trace::Event& e) {
    if (e.arg_name != nullptr) out << ",\"args\":{\"" << e.arg_name << "\":" << e.arg << "}";
  };
  for (const trace::Event& e : trace::take_events()) {
    const std::string head = std::string("\"cat\":\"") + e.category + "\",\"name\":\"" + e.name +
                             "\",\"pid\":" + std::to_string(rank) +
                             ",\"tid\":" + std::to_string(e.thread);
    // Microseconds with nanosecond digits: spans of a few microseconds keep their order.
    if (e.async_id == 0) {
      std::snprintf(number, sizeof number, "\"ts\":%.3f,\"dur\":%.3f", e.begin_us, e.duration_us);
      out << ",{\"ph\":\"X\"," << head << "," << number;
      args(e);
      out << "}";
    } else {  // a begin/end pair with an id of its own: a row of its own, may overlap
      std::snprintf(number, sizeof number, "\"ts\":%.3f", e.begin_us);
      out << ",{\"ph\":\"b\"," << head << ",\"id\":" << e.async_id << "," << number;
      args(e);
      std::snprintf(number, sizeof number, "\"ts\":%.3f", e.begin_us + e.duration_us);
      out << "},{\"ph\":\"e\"," << head << ",\"id\":" << e.async_id << "," << number << "}";
    }
  }
  return out.str();
}

}  // namespace

void parse_trace_steps(const std::string& text, std::int64_t& first, std::int64_t& last) {
  const auto colon = text.find(':');
  bool ok = colon != std::string::npos;
  if (ok) {
    try {
      std::size_t used_first = 0, used_last = 0;
      first = std::stoll(text.substr(0, colon), &used_first);
      last = std::stoll(text.substr(colon + 1), &used_last);
      ok = used_first == colon && used_last == text.size() - colon - 1 && first >= 1 &&
           last >= first;
    } catch (const std::exception&) {
      ok = false;
    }
  }
  if (!ok)
    throw ConfigError("monitor.trace_steps = \"" + text +
                      "\": expected first:last, optimizer steps with 1 <= first <= last "
                      "(e.g. 3:5)");
}

TraceWindow::TraceWindow(const MonitorConfig& config, const ProcessGrid& grid,
                         std::int64_t steps_done)
    : path_(config.trace), grid_(grid) {
  parse_trace_steps(config.trace_steps, first_, last_);
  if (path_.empty()) return;
  // A directory (existing, or named with a trailing slash) gets trace.json inside it.
  if (path_.back() == '/' || std::filesystem::is_directory(path_)) {
    std::filesystem::create_directories(path_);
    path_ = (std::filesystem::path(path_) / "trace.json").string();
  }
  if (steps_done >= last_) written_ = true;  // a resumed run past the window: nothing to record
  TRELLIS_MPI(MPI_Barrier(grid_.world().get()));
  trace::set_epoch();
  trace::name_thread("main");
}

void TraceWindow::before_step(std::int64_t step) {
  if (path_.empty() || written_) return;
  if (step > last_) {
    trace::set_recording(false);
    write();
    return;
  }
  if (step >= first_) {
    trace::set_recording(true);
    opened_ = true;
  }
}

void TraceWindow::finish() {
  if (path_.empty() || written_) return;
  trace::set_recording(false);
  if (opened_) write();
}

void TraceWindow::write() {
  written_ = true;
  const MPI_Comm world = grid_.world().get();
  const std::string mine = rank_events(grid_.rank(), grid_.coords());
  const int length = static_cast<int>(mine.size());
  const int ranks = grid_.world().size();
  std::vector<int> lengths(grid_.rank() == 0 ? ranks : 0), offsets(lengths.size());
  TRELLIS_MPI(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, world));
  std::string all;
  if (grid_.rank() == 0) {
    std::size_t total = 0;
    for (int r = 0; r < ranks; ++r) {
      offsets[r] = static_cast<int>(total);
      total += static_cast<std::size_t>(lengths[r]);
    }
    all.resize(total);
  }
  TRELLIS_MPI(MPI_Gatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(),
                          MPI_CHAR, 0, world));
  if (grid_.rank() != 0) return;
  std::string json = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  bool first = true;
  for (int r = 0; r < ranks; ++r) {
    if (lengths[r] == 0) continue;
    if (!first) json += ",";
    json.append(all, static_cast<std::size_t>(offsets[r]), static_cast<std::size_t>(lengths[r]));
    first = false;
  }
  json += "]}\n";
  const std::string tmp = path_ + ".tmp";
  write_file_durably(tmp, json);
  publish_by_rename(tmp, path_);
}

}  // namespace trellis
