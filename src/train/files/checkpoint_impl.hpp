// Shared by checkpoint_file.cpp and checkpoint_dir.cpp; not part of the public interface.
#pragma once

#include <string>

namespace trellis {

std::string strip_trailing_slashes(std::string path);

// Rank 0, after every rank closed <root>/<name>.tmp/state.h5: makes it durable, publishes it
// as <root>/<name>, points `latest` at it, prunes to the newest `keep` (keep <= 0: all).
void publish_checkpoint(const std::string& root, const std::string& name, int keep);

}  // namespace trellis
