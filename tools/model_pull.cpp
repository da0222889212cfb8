// pull_model / run_pull (see model_pull.h).
#include "model_pull.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "core/file_system.h"
#include "core/log.h"
#include "host/progress_reporter.h"
#include "pull/downloader.h"
#include "pull/model_ref.h"

namespace keel::cli {

std::string keel_cache_dir() {
  if (const char* home = std::getenv("KEEL_HOME"); home && *home) return home;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/keel";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/keel";
  return "/tmp/keel";
}

Result<std::string> pull_model(const PullOptions& o) {
  const char* endpoint = std::getenv("HF_ENDPOINT");
  KEEL_ASSIGN_OR_RETURN(
      pull::ModelSource source,
      pull::parse_model_ref(o.ref, endpoint && *endpoint ? endpoint : pull::kDefaultHfEndpoint));
  const std::string path = keel_cache_dir() + "/models/" + source.cache_path;
  PosixFileSystem fs;
  if (fs.exists(path) && !o.force) return path;
  KEEL_TRY(fs.create_directories(std::filesystem::path(path).parent_path().string()));
  pull::DownloadOptions d;
  d.url = source.url;
  d.path = path;
  d.expected_sha256 = o.sha256;
  d.max_attempts = o.retries;
  d.io_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
  host::ProgressReporter progress("downloading " + o.ref, "B");
  d.progress = [&progress](uint64_t done, uint64_t total) {
    if (total > 0) progress.update(done, total);
  };
  KEEL_ASSIGN_OR_RETURN(pull::DownloadReport r, pull::download(fs, d));
  progress.finish();
  KEEL_LOG_INFO("pulled {} → {} ({} bytes, {} attempt(s){}, sha256 {}{})", o.ref, path, r.bytes,
                r.attempts, r.resumed ? ", resumed" : "", r.sha256,
                r.verified ? " verified" : " not verified: no expected digest");
  return path;
}

int run_pull(const PullOptions& o) {
  Result<std::string> path = pull_model(o);
  if (!path.ok()) {
    std::fprintf(stderr, "keel: pull: %s\n", path.status().message().c_str());
    return 1;
  }
  std::printf("%s\n", path->c_str());
  return 0;
}

}  // namespace keel::cli
