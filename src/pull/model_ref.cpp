// parse_model_ref (see model_ref.h).
#include "pull/model_ref.h"

#include <vector>

namespace keel::pull {
namespace {

bool safe_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.';
}

bool safe_segment(std::string_view s) {
  if (s.empty() || s == "." || s == "..") return false;
  for (const char c : s) {
    if (!safe_char(c)) return false;
  }
  return true;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end - start));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

// The URL's path as cache segments: unsafe characters become '_', empty / dot segments dropped.
std::string url_cache_path(const net::Url& url) {
  std::string out = "url/" + url.host + "_" + std::to_string(url.port);
  std::string_view path = url.target;
  if (const size_t q = path.find('?'); q != std::string_view::npos) path = path.substr(0, q);
  for (std::string_view seg : split(path, '/')) {
    if (seg.empty() || seg == "." || seg == "..") continue;
    std::string clean(seg);
    for (char& c : clean) {
      if (!safe_char(c)) c = '_';
    }
    out += "/" + clean;
  }
  return out;
}

Result<ModelSource> parse_hf(std::string_view ref, std::string_view endpoint) {
  const std::vector<std::string_view> parts = split(ref, '/');
  const auto bad = [&](std::string_view why) {
    return Status::invalid_argument("bad model reference \"" + std::string(ref) + "\": " +
                                    std::string(why) + " (expected org/repo/file.gguf or a URL)");
  };
  if (parts.size() < 3) return bad("too few parts");
  std::string_view repo = parts[1];
  std::string revision = "main";
  if (const size_t at = repo.find('@'); at != std::string_view::npos) {
    revision = std::string(repo.substr(at + 1));
    repo = repo.substr(0, at);
    if (!safe_segment(revision)) return bad("bad revision");
  }
  if (!safe_segment(parts[0]) || !safe_segment(repo)) return bad("bad org or repo name");
  std::string file;
  for (size_t i = 2; i < parts.size(); ++i) {
    if (!safe_segment(parts[i])) return bad("bad file path");
    file += (i > 2 ? "/" : "") + std::string(parts[i]);
  }
  if (!file.ends_with(".gguf")) return bad("the file must be a .gguf");
  std::string base(endpoint);
  while (base.ends_with("/")) base.pop_back();
  const std::string repo_id = std::string(parts[0]) + "/" + std::string(repo);
  KEEL_ASSIGN_OR_RETURN(net::Url url,
                        net::parse_url(base + "/" + repo_id + "/resolve/" + revision + "/" + file));
  return ModelSource{std::move(url), "hf/" + repo_id + "/" + revision + "/" + file};
}

}  // namespace

bool looks_remote(std::string_view ref) {
  if (ref.starts_with("http://") || ref.starts_with("https://")) return true;
  return !ref.starts_with("/") && !ref.starts_with(".") && ref.ends_with(".gguf") &&
         split(ref, '/').size() >= 3;
}

Result<ModelSource> parse_model_ref(std::string_view ref, std::string_view hf_endpoint) {
  if (ref.starts_with("http://") || ref.starts_with("https://")) {
    KEEL_ASSIGN_OR_RETURN(net::Url url, net::parse_url(ref));
    std::string cache = url_cache_path(url);
    if (cache.find('/', 4) == std::string::npos) {
      return Status::invalid_argument("bad model URL \"" + std::string(ref) + "\": no file name");
    }
    return ModelSource{std::move(url), std::move(cache)};
  }
  return parse_hf(ref, hf_endpoint);
}

}  // namespace keel::pull
