// data.stage's record of a staged copy (staged_copy.hpp): a copy is reused only while it is an
// intact copy of the source as the source is now.
#include "catch.hpp"
#include "unit/support/text_helpers.hpp"

#include "trellis/data/staged_copy.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

using namespace trellis;
namespace fs = std::filesystem;

namespace {

using trellis::test::read_all;

void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Overwrites bytes in place (size kept), then restores the old mtime if asked: an edit that
// only the contents give away.
void edit_in_place(const std::string& path, bool keep_mtime) {
  struct stat before {};
  REQUIRE(::stat(path.c_str(), &before) == 0);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(10);
    f << "EDITED";
  }
  if (keep_mtime) {
    const struct timespec times[2] = {before.st_atim, before.st_mtim};
    REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
  }
}

struct Scratch {
  fs::path dir;
  Scratch() {
    std::string pattern = (fs::temp_directory_path() / "trellis-staged-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    dir = pattern;
  }
  ~Scratch() { fs::remove_all(dir); }
};

}  // namespace

TEST_CASE("content hash: depends on the bytes only, not on how they are fed", "[staging]") {
  std::string bytes;
  for (int i = 0; i < 1000; ++i) bytes.push_back(static_cast<char>(i * 37 % 251));
  ContentHash whole;
  whole.update(bytes.data(), bytes.size());
  ContentHash pieces;
  for (std::size_t at = 0, step = 1; at < bytes.size(); at += step, step = step % 13 + 1)
    pieces.update(bytes.data() + at, std::min(step, bytes.size() - at));
  CHECK(whole.digest() == pieces.digest());
  std::string edited = bytes;
  edited[500] ^= 1;
  ContentHash other;
  other.update(edited.data(), edited.size());
  CHECK(other.digest() != whole.digest());
  ContentHash shorter;
  shorter.update(bytes.data(), bytes.size() - 1);
  CHECK(shorter.digest() != whole.digest());
}

TEST_CASE("a staged copy is reused only while it matches its source", "[staging]") {
  const Scratch scratch;
  const std::string source = (scratch.dir / "train.h5").string();
  const std::string staged = (scratch.dir / "staged.h5").string();
  const std::string contents(100000, 'x');
  write_all(source, contents);

  CHECK_FALSE(staged_copy_is_current(source, staged));  // nothing staged yet
  copy_and_record(source, staged);
  CHECK(read_all(staged) == contents);
  CHECK(staged_record_path(staged) == (scratch.dir / ".staged.h5.source").string());
  CHECK(fs::exists(staged_record_path(staged)));
  CHECK_FALSE(fs::exists(scratch.dir / ".staged.h5.partial"));
  CHECK(staged_copy_is_current(source, staged));

  SECTION("the staged copy edited, same size") {
    edit_in_place(staged, false);
    CHECK_FALSE(staged_copy_is_current(source, staged));
  }
  SECTION("the staged copy edited, same size and mtime: the hash tells") {
    edit_in_place(staged, true);
    CHECK_FALSE(staged_copy_is_current(source, staged));
  }
  SECTION("the source edited, same size") {
    edit_in_place(source, false);
    CHECK_FALSE(staged_copy_is_current(source, staged));
  }
  SECTION("another source of the same name and size") {
    const std::string elsewhere = (scratch.dir / "other.h5").string();
    write_all(elsewhere, contents);
    CHECK_FALSE(staged_copy_is_current(elsewhere, staged));
  }
  SECTION("a copy without its record (staged by an older Trellis, or a crash)") {
    fs::remove(staged_record_path(staged));
    CHECK_FALSE(staged_copy_is_current(source, staged));
  }
  // Copying again repairs it.
  copy_and_record(source, staged);
  CHECK(read_all(staged) == read_all(source));
  CHECK(staged_copy_is_current(source, staged));
}
