#include "trellis/train/monitoring/progress.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace trellis {

namespace {
double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

bool started_by_mpi_launcher(const std::function<const char*(const char*)>& get_env) {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"}) {
    const char* value = get_env(name);
    if (value != nullptr && *value != '\0') return true;
  }
  return false;
}

ConsoleFacts console_facts() {
  ConsoleFacts facts;
  facts.stdout_is_tty = isatty(STDOUT_FILENO) == 1;
  facts.under_mpi_launcher =
      started_by_mpi_launcher([](const char* name) -> const char* { return std::getenv(name); });
  return facts;
}

bool want_progress_bar(const char* mode, int rank, const ConsoleFacts& facts) {
  if (rank != 0 || std::strcmp(mode, "lines") == 0) return false;
  if (std::strcmp(mode, "bar") == 0) return true;
  return facts.stdout_is_tty && !facts.under_mpi_launcher;
}

bool want_progress_bar(const char* mode, int rank) {
  return want_progress_bar(mode, rank, console_facts());
}

void ProgressBar::update(std::int64_t epoch, std::int64_t step, std::int64_t total_steps,
                         double loss, double samples_per_sec, double eta_s) {
  if (!enabled_) return;
  const double t = now();
  if (step != total_steps && last_draw_ >= 0 && t - last_draw_ < 0.1) return;
  last_draw_ = t;
  constexpr int kWidth = 30;
  const double done = total_steps > 0 ? static_cast<double>(step) / total_steps : 1.0;
  char bar[kWidth + 1];
  const int filled = static_cast<int>(done * kWidth);
  for (int i = 0; i < kWidth; ++i) bar[i] = i < filled ? '#' : '.';
  bar[kWidth] = '\0';
  const long long eta = static_cast<long long>(eta_s);
  std::printf(
      "\r\033[Kepoch %lld [%s] %lld/%lld  loss %.4f  %.0f samples/s  ETA %lld:%02lld:%02lld",
      static_cast<long long>(epoch), bar, static_cast<long long>(step),
      static_cast<long long>(total_steps), loss, samples_per_sec, eta / 3600, eta / 60 % 60,
      eta % 60);
  std::fflush(stdout);
  drawn_ = true;
}

void ProgressBar::clear() {
  if (!enabled_ || !drawn_) return;
  std::printf("\r\033[K");
  std::fflush(stdout);
  drawn_ = false;
}

}  // namespace trellis
