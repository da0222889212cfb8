// The built-in models `-m` names without a file: stories260K (real pretrained weights, the
// default when no model is given; its bytes are embedded in the binary) and a small random-weight
// Llama (`builtin:random`, made on first use). Both are written once to the cache directory
// ($KEEL_HOME, else $XDG_CACHE_HOME/keel, else ~/.cache/keel) and served from there; a cached
// copy whose size differs from the embedded bytes is rewritten.
//
// References: ""  or "builtin:stories260K" → stories260K; "builtin:random" → the random model;
// any other "builtin:" name → InvalidArgument listing the known ones; a URL or Hugging Face-style
// reference that is not a local file is pulled into the cache (model_pull.h); everything else is a
// path and passes through unchanged.
#pragma once

#include <string>
#include <string_view>

#include "core/result.h"
#include "core/thread_pool.h"

namespace keel::cli {

inline constexpr std::string_view kBuiltinPrefix = "builtin:";

// True for "" and "builtin:..." references.
[[nodiscard]] bool is_builtin_model(std::string_view ref);
// The API's model id for a built-in reference ("stories260K", "keel-random"); "" for a path.
[[nodiscard]] std::string builtin_model_name(std::string_view ref);
// The file to load for `ref` (see above), writing a built-in model to the cache on first use.
// (Callers pass every -m value through it, not only built-in ones.)
Result<std::string> resolve_model_path(const std::string& ref, ThreadPool& pool);

}  // namespace keel::cli
