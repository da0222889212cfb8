// Built-in models (see builtin_models.h): the embedded stories260K bytes and the random model,
// each written to the cache directory atomically (temporary file, then rename).
#include "builtin_models.h"

#include <span>

#include "core/file_system.h"
#include "core/log.h"
#include "host/progress_reporter.h"
#include "model/random_model.h"
#include "model_pull.h"
#include "pull/model_ref.h"

// models/stories260K/stories260K.gguf, embedded at build time (KEEL_STORIES260K_GGUF is its
// absolute path, set by tools/CMakeLists.txt). The file is fixed; the size check below guards
// against a stale object file.
asm(".pushsection .rodata\n"
    ".balign 64\n"
    ".globl keel_builtin_stories260K_begin\n"
    "keel_builtin_stories260K_begin:\n"
    ".incbin \"" KEEL_STORIES260K_GGUF
    "\"\n"
    ".globl keel_builtin_stories260K_end\n"
    "keel_builtin_stories260K_end:\n"
    ".popsection\n");
extern "C" const unsigned char keel_builtin_stories260K_begin[];
extern "C" const unsigned char keel_builtin_stories260K_end[];

namespace keel::cli {
namespace {

constexpr std::string_view kStories = "stories260K";
constexpr std::string_view kRandom = "random";
constexpr uint64_t kStoriesBytes = 1185376;  // models/stories260K/README.md
constexpr const char* kStoriesFile = "stories260K.gguf";
constexpr const char* kRandomFile = "default-tiny-f32-v2.gguf";

std::string_view builtin_of(std::string_view ref) {
  if (ref.empty()) return kStories;
  return ref.substr(kBuiltinPrefix.size());
}

std::span<const std::byte> stories_bytes() {
  const auto* begin = reinterpret_cast<const std::byte*>(keel_builtin_stories260K_begin);
  const auto* end = reinterpret_cast<const std::byte*>(keel_builtin_stories260K_end);
  return {begin, static_cast<size_t>(end - begin)};
}

Status write_stories(FileSystem& fs, const std::string& path) {
  const std::span<const std::byte> bytes = stories_bytes();
  if (bytes.size() != kStoriesBytes) {
    return Status::internal("the embedded stories260K model has " + std::to_string(bytes.size()) +
                            " bytes, expected " + std::to_string(kStoriesBytes) +
                            " (rebuild keel)");
  }
  const std::string tmp = path + ".tmp";
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> f, fs.open_writable(tmp));
  KEEL_TRY(f->append(bytes));
  KEEL_TRY(f->close());
  return fs.rename(tmp, path);
}

Result<std::string> ensure_stories(FileSystem& fs, const std::string& dir) {
  const std::string path = dir + "/" + kStoriesFile;
  bool fresh = fs.exists(path);
  if (fresh) {
    KEEL_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> f, fs.open_readable(path));
    fresh = f->size() == kStoriesBytes;
  }
  if (!fresh) KEEL_TRY(write_stories(fs, path));
  KEEL_LOG_INFO(
      "no model given: serving the built-in stories260K (TinyStories, {}) — "
      "-m builtin:random for the random-weight model",
      path);
  return path;
}

Result<std::string> ensure_random(FileSystem& fs, const std::string& dir, ThreadPool& pool) {
  const std::string path = dir + "/" + kRandomFile;
  if (!fs.exists(path)) {
    model::RandomModelSpec spec;
    spec.shape = *model::find_model_shape("tiny");
    spec.name = "keel-default (random weights)";
    KEEL_LOG_WARN("creating the built-in random model at {}", path);
    host::ProgressReporter progress("writing the random model", "");
    KEEL_TRY(model::write_random_model(spec, path, pool, [&progress](size_t done, size_t total) {
      progress.update(done, total);
    }));
  }
  KEEL_LOG_WARN("using the built-in random model {} — random weights, its text is noise", path);
  return path;
}

}  // namespace

bool is_builtin_model(std::string_view ref) {
  return ref.empty() || ref.starts_with(kBuiltinPrefix);
}

std::string builtin_model_name(std::string_view ref) {
  if (!is_builtin_model(ref)) return "";
  return builtin_of(ref) == kRandom ? "keel-random" : std::string(kStories);
}

Result<std::string> resolve_model_path(const std::string& ref, ThreadPool& pool) {
  if (!is_builtin_model(ref)) {
    if (PosixFileSystem().exists(ref) || !pull::looks_remote(ref)) return ref;
    return pull_model(PullOptions{.ref = ref});
  }
  const std::string_view which = builtin_of(ref);
  if (which != kStories && which != kRandom) {
    return Status::invalid_argument("unknown built-in model \"" + ref +
                                    "\" (known: builtin:stories260K, builtin:random)");
  }
  PosixFileSystem fs;
  const std::string dir = keel_cache_dir();
  KEEL_TRY(fs.create_directories(dir));
  if (which == kStories) return ensure_stories(fs, dir);
  return ensure_random(fs, dir, pool);
}

}  // namespace keel::cli
