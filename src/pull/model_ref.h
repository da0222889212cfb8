// Model references that name a remote file: an http(s) URL, or a Hugging Face-style
// `org/repo/path/file.gguf` (optionally `org/repo@revision/file.gguf`), fetched from
// `{endpoint}/org/repo/resolve/{revision}/path/file.gguf` (endpoint: $HF_ENDPOINT, default
// https://huggingface.co; revision default "main"). Each maps to a fixed path in the local cache,
// so a second use finds the file without the network.
// Thread safety: plain values and pure functions.
#pragma once

#include <string>
#include <string_view>

#include "core/result.h"
#include "net/url.h"

namespace keel::pull {

inline constexpr std::string_view kDefaultHfEndpoint = "https://huggingface.co";

struct ModelSource {
  net::Url url;
  std::string cache_path;  // relative to the model cache: "hf/org/repo/rev/file.gguf", "url/..."
};

// True when `ref` has the shape of a URL or a Hugging Face reference (it may still fail to parse).
[[nodiscard]] bool looks_remote(std::string_view ref);
// InvalidArgument naming the broken part.
Result<ModelSource> parse_model_ref(std::string_view ref, std::string_view hf_endpoint);

}  // namespace keel::pull
