// ensure_default_model: cache-directory resolution and one-time creation of the default model.
#include "default_model.h"

#include <cstdlib>

#include "core/file_system.h"
#include "core/log.h"
#include "model/random_model.h"
#include "progress.h"

namespace keel::cli {
namespace {

constexpr const char* kDefaultFile = "default-tiny-f32-v2.gguf";

std::string cache_dir() {
  if (const char* home = std::getenv("KEEL_HOME"); home && *home) return home;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/keel";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/keel";
  return "/tmp/keel";
}

}  // namespace

Result<std::string> ensure_default_model(ThreadPool& pool) {
  PosixFileSystem fs;
  const std::string dir = cache_dir();
  const std::string path = dir + "/" + kDefaultFile;
  if (!fs.exists(path)) {
    KEEL_TRY(fs.create_directories(dir));
    model::RandomModelSpec spec;
    spec.shape = *model::find_model_shape("tiny");
    spec.name = "keel-default (random weights)";
    KEEL_LOG_WARN("creating the built-in default model at {}", path);
    ProgressReporter progress("writing default model", "");
    KEEL_TRY(model::write_random_model(spec, path, pool, [&progress](size_t done, size_t total) {
      progress.update(done, total);
    }));
  }
  KEEL_LOG_WARN(
      "no model given: using the built-in default model {} — random weights, its text is noise",
      path);
  return path;
}

}  // namespace keel::cli
