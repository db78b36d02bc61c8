// Console output for an SPMD program: progress from rank 0 only, warnings and errors from the
// rank that has them, prefixed with that rank so a 1000-rank log stays readable.
#pragma once

#include <string>

namespace trellis {

class Logger {
 public:
  explicit Logger(int rank = 0) : rank_(rank) {}
  int rank() const { return rank_; }

  void info(const std::string& message) const;   // rank 0, stdout
  void warn(const std::string& message) const;   // any rank, stderr
  void error(const std::string& message) const;  // any rank, stderr

 private:
  int rank_;
};

}  // namespace trellis
