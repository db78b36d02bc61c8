#include "trellis/core/durable_file.hpp"

#include "trellis/core/error.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace trellis {

namespace {

namespace fs = std::filesystem;

[[noreturn]] void throw_errno(const std::string& what, const std::string& path, int err) {
  throw Error("cannot " + what + " '" + path + "': " + std::strerror(err));
}

// fsync(fd), then close it; either failure names the path.
void fsync_and_close(int fd, const std::string& path) {
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    throw_errno("fsync", path, err);
  }
  if (::close(fd) != 0) throw_errno("close", path, errno);
}

void fsync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (directory ? O_DIRECTORY : 0));
  if (fd < 0) throw_errno("open", path, errno);
  fsync_and_close(fd, path);
}

void rename_path(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0)
    throw Error("cannot rename '" + from + "' to '" + to + "': " + std::strerror(errno));
}

}  // namespace

void fsync_file(const std::string& path) { fsync_path(path, false); }

void fsync_directory(const std::string& path) { fsync_path(path, true); }

void write_file_durably(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw_errno("create", path, errno);
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      throw_errno("write", path, err);
    }
    done += static_cast<std::size_t>(n);
  }
  fsync_and_close(fd, path);
}

void publish_by_rename(const std::string& tmp, const std::string& final_path) {
  std::error_code ec;
  const bool is_directory = fs::is_directory(tmp, ec);
  fsync_path(tmp, is_directory);
  std::string old;
  if (fs::is_directory(final_path, ec)) {
    old = final_path + ".old";
    remove_tree(old);
    rename_path(final_path, old);
  }
  rename_path(tmp, final_path);
  fsync_directory(parent_directory(final_path));
  if (!old.empty()) remove_tree(old);
}

void remove_tree(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) throw Error("cannot remove '" + path + "': " + ec.message());
}

std::string parent_directory(const std::string& path) {
  const std::string parent = fs::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

}  // namespace trellis
