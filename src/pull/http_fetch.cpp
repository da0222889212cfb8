// fetch() (see http_fetch.h): a streamed GET through net's HTTP client with a per-operation
// deadline; the head's download fields (length, range, location, ETag) are read here.
#include "pull/http_fetch.h"

#include <charconv>

#include "net/http_client.h"

namespace keel::pull {
namespace {

std::optional<uint64_t> to_u64(std::string_view s) {
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

FetchHead head_of(const net::HttpHead& h) {
  FetchHead head;
  head.status = h.status;
  if (auto v = h.field("Content-Length")) head.content_length = to_u64(*v);
  if (auto v = h.field("Location")) head.location = *v;
  if (auto v = h.field("X-Linked-ETag")) {
    head.etag = *v;
  } else if (auto e = h.field("ETag")) {
    head.etag = *e;
  }
  if (auto range = h.field("Content-Range")) {
    std::string_view v = *range;  // "bytes a-b/total"
    if (v.starts_with("bytes ")) {
      v.remove_prefix(6);
      const size_t dash = v.find('-');
      const size_t slash = v.find('/');
      if (dash != std::string_view::npos) head.range_start = to_u64(v.substr(0, dash));
      if (slash != std::string_view::npos) head.total_size = to_u64(v.substr(slash + 1));
    }
  }
  std::erase(head.etag, '"');
  if (head.etag.starts_with("W/")) head.etag.erase(0, 2);
  return head;
}

}  // namespace

Result<FetchHead> fetch(const FetchRequest& req, const HeadSink& on_head, const BodySink& on_body) {
  net::HttpRequest get;
  get.url = req.url;
  get.headers = {{"User-Agent", "keel-pull"}, {"Accept-Encoding", "identity"}};
  if (req.offset > 0)
    get.headers.emplace_back("Range", "bytes=" + std::to_string(req.offset) + "-");
  net::HttpOptions options;
  options.timeout = req.io_timeout;
  options.scope = net::TimeoutScope::kEachOperation;
  FetchHead head;
  const auto head_sink = [&](const net::HttpHead& h) -> Result<net::AfterHead> {
    head = head_of(h);
    KEEL_TRY(on_head(head));
    const bool ok = head.status >= 200 && head.status < 300;
    return ok ? net::AfterHead::kReadBody : net::AfterHead::kStop;
  };
  const auto body_sink = [&](std::string_view piece) -> Status {
    return on_body({reinterpret_cast<const std::byte*>(piece.data()), piece.size()});
  };
  KEEL_TRY(net::http_stream(get, options, head_sink, body_sink));
  return head;
}

}  // namespace keel::pull
