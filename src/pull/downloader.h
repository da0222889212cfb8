// download(): a model file from a URL into `path`, resumable and verified. Bytes go to
// `path + ".part"`; a transfer that breaks (connection lost, deadline, 5xx) is retried from the
// .part's size with a Range request, up to max_attempts; a server that ignores Range (200) starts
// the file over. Redirects (3xx with Location, at most 8, across hosts and schemes) are
// followed. When complete, the file's SHA-256 is checked against `expected_sha256`, or else
// against the server's X-Linked-ETag / ETag when that is a SHA-256 (Hugging Face sends the LFS
// object's hash): a mismatch deletes the .part and fails with Corrupt. Only then is the .part
// renamed to `path`, so `path` never holds a partial or unverified file.
// Errors: NotFound (404), InvalidArgument (other 4xx, bad redirects), Unavailable (retries spent),
// Corrupt (checksum, a size that does not add up), IoError (local files).
// Thread safety: reentrant.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "core/file_system.h"
#include "core/result.h"
#include "net/url.h"

namespace keel::pull {

struct DownloadOptions {
  net::Url url;
  std::string path;             // the final file
  std::string expected_sha256;  // hex; "" = the server's, when it gives one
  int max_attempts = 5;
  std::chrono::milliseconds retry_backoff{500};  // doubled after each failed attempt
  std::chrono::milliseconds io_timeout{30000};
  std::function<void(uint64_t done, uint64_t total)> progress;  // total 0 = unknown
};

struct DownloadReport {
  uint64_t bytes = 0;              // the file's size
  uint64_t bytes_transferred = 0;  // received over the network by this call
  int attempts = 0;
  bool resumed = false;   // some attempt continued a .part
  std::string sha256;     // of the file
  bool verified = false;  // checked against an expected digest
};

Result<DownloadReport> download(FileSystem& fs, const DownloadOptions& options);

}  // namespace keel::pull
