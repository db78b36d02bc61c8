// Files that survive a crash: data is fsynced before a name points to it, and the directory is
// fsynced after a rename, so after a power loss a name either still shows the old content or
// the complete new one (POSIX rename(2) is atomic; the fsyncs order it against the data).
//
// Every function throws trellis::Error naming the path and the system error.
#pragma once

#include <string>

namespace trellis {

// fsync(2) of a regular file or of a directory (its entries: creations, renames, removals).
void fsync_file(const std::string& path);
void fsync_directory(const std::string& path);

// Writes `text` to a new (or truncated) file at path and fsyncs it.
void write_file_durably(const std::string& path, const std::string& text);

// Publishes `tmp` (a file or a directory tree whose files the caller already synced) under
// `final_path`: fsync tmp, rename(2) it over final_path, fsync the parent directory. A final
// path that is a directory is moved aside to "<final>.old" first and removed after the rename
// (rename(2) replaces neither a non-empty directory nor a directory by a file).
void publish_by_rename(const std::string& tmp, const std::string& final_path);

// Removes path and everything below it; nothing when it does not exist.
void remove_tree(const std::string& path);

// "a/b" for "a/b/c"; "." for "c".
std::string parent_directory(const std::string& path);

}  // namespace trellis
