// Remote models for `-m` and `keel pull`: an http(s) URL or a Hugging Face-style reference
// (pull/model_ref.h) is downloaded (resumable, SHA-256-verified, with a progress bar) into the
// model cache, $KEEL_HOME/models/<source path>, once; later uses find it there offline.
#pragma once

#include <string>

#include "core/result.h"

namespace keel::cli {

struct PullOptions {
  std::string ref;
  std::string sha256;  // expected digest; "" = the server's if it gives one
  int retries = 5;     // attempts in all
  double timeout_s = 30;
  bool force = false;  // download again even when cached
};

// The cache directory: $KEEL_HOME, else $XDG_CACHE_HOME/keel, else ~/.cache/keel.
std::string keel_cache_dir();
// The local file for a remote reference, downloading it if it is not cached (or with force).
Result<std::string> pull_model(const PullOptions& options);
// `keel pull`: pull_model, then print the file's path.
int run_pull(const PullOptions& options);

}  // namespace keel::cli
