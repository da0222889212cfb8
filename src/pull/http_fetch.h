// fetch(): one HTTP/1.1 GET over plain TCP or TLS (net/http_client.h: the system's CA
// store, SNI and host-name verification), optionally from a byte offset (Range), streaming the
// body of a 2xx response to a sink. Redirects are not followed here: the caller sees 3xx and the
// Location header (the downloader follows them). Every socket operation has an idle deadline.
// Errors: Unavailable for connection, TLS and mid-body transport failures (worth retrying);
// whatever the sinks return stops the transfer and is passed back.
// Thread safety: reentrant; each call has its own connection.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "core/result.h"
#include "net/url.h"

namespace keel::pull {

struct FetchRequest {
  net::Url url;
  uint64_t offset = 0;                          // > 0: "Range: bytes=offset-"
  std::chrono::milliseconds io_timeout{30000};  // per socket operation without progress
};

struct FetchHead {
  int status = 0;
  std::optional<uint64_t> content_length;
  std::optional<uint64_t> range_start;  // 206: the first byte of Content-Range
  std::optional<uint64_t> total_size;   // 206: the total of Content-Range ("*" → none)
  std::string location;                 // 3xx
  std::string etag;                     // X-Linked-ETag if present (Hugging Face LFS), else ETag
};

using HeadSink = std::function<Status(const FetchHead&)>;
using BodySink = std::function<Status(std::span<const std::byte>)>;

// Sends the GET, passes the head to `on_head` (a non-ok Status aborts), then, for a 2xx status,
// each piece of the body to `on_body`. Returns the head once the body ended.
Result<FetchHead> fetch(const FetchRequest& request, const HeadSink& on_head,
                        const BodySink& on_body);

}  // namespace keel::pull
