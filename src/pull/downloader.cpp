// download() (see downloader.h): attempts, each following redirects, appending to the .part.
#include "pull/downloader.h"

#include <thread>

#include "core/log.h"
#include "pull/http_fetch.h"
#include "pull/sha256.h"

namespace keel::pull {
namespace {

constexpr int kMaxRedirects = 8;

uint64_t file_size(FileSystem& fs, const std::string& path) {
  if (!fs.exists(path)) return 0;
  Result<std::unique_ptr<RandomAccessFile>> f = fs.open_readable(path);
  return f.ok() ? (*f)->size() : 0;
}

// One attempt's state: where the .part stands and what the server said about the whole file.
struct Attempt {
  FileSystem& fs;
  const DownloadOptions& options;
  std::string part;
  uint64_t have = 0;   // bytes in the .part
  uint64_t total = 0;  // the file's size once known
  std::string server_sha256;
  DownloadReport* report;
  std::unique_ptr<WritableFile> out;

  // Decides what the response means for the .part before its body arrives.
  Status on_head(const FetchHead& h) {
    if (h.status >= 300 && h.status < 400) return Status::ok_status();  // a redirect
    if (h.status == 404) {
      return Status::not_found(options.url.str() + ": not found (HTTP 404)");
    }
    if (h.status == 416 && have > 0) {  // the .part is complete already, or junk: start over
      out.reset();
      KEEL_TRY(fs.remove(part));
      have = 0;
      return Status::unavailable("range not satisfiable; restarting the download");
    }
    if (h.status >= 400 && h.status < 500) {
      return Status::invalid_argument(options.url.str() + ": HTTP " + std::to_string(h.status));
    }
    if (h.status >= 500) return Status::unavailable("HTTP " + std::to_string(h.status));
    if (is_sha256_hex(h.etag)) server_sha256 = h.etag;
    if (h.status == 206) {
      if (h.range_start.value_or(have) != have) {
        return Status::corrupt("the server answered a range starting elsewhere");
      }
      report->resumed = report->resumed || have > 0;
      if (h.total_size) total = *h.total_size;
      KEEL_ASSIGN_OR_RETURN(out, fs.open_appendable(part));
    } else {
      have = 0;  // a full body: start the file over
      if (h.content_length) total = *h.content_length;
      KEEL_ASSIGN_OR_RETURN(out, fs.open_writable(part));
    }
    return Status::ok_status();
  }

  Status on_body(std::span<const std::byte> bytes) {
    KEEL_TRY(out->append(bytes));
    have += bytes.size();
    report->bytes_transferred += bytes.size();
    if (options.progress) options.progress(have, total);
    return Status::ok_status();
  }

  // Follows redirects until a 2xx body ended. Ok when the .part then holds the whole file.
  Status run() {
    net::Url url = options.url;
    for (int hop = 0;; ++hop) {
      FetchRequest req{url, have, options.io_timeout};
      Result<FetchHead> head = fetch(
          req, [this](const FetchHead& h) { return on_head(h); },
          [this](std::span<const std::byte> b) { return on_body(b); });
      if (out) {
        const Status closed = out->close();
        out.reset();
        KEEL_TRY(closed);
      }
      KEEL_TRY(head.status());
      if (head->status < 300) break;
      if (head->location.empty()) return Status::invalid_argument("a redirect without Location");
      if (hop >= kMaxRedirects) return Status::invalid_argument("too many redirects");
      KEEL_ASSIGN_OR_RETURN(url, net::resolve_location(url, head->location));
    }
    if (total != 0 && have != total) {
      return Status::unavailable("the body ended after " + std::to_string(have) + " of " +
                                 std::to_string(total) + " bytes");
    }
    return Status::ok_status();
  }
};

bool retryable(const Status& s) { return s.code() == StatusCode::kUnavailable; }

Result<DownloadReport> verify_and_publish(FileSystem& fs, const DownloadOptions& o,
                                          const std::string& part, const std::string& server,
                                          DownloadReport report) {
  KEEL_ASSIGN_OR_RETURN(report.sha256, sha256_file(fs, part));
  std::string expected = o.expected_sha256.empty() ? server : o.expected_sha256;
  for (char& c : expected) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!expected.empty()) {
    if (expected != report.sha256) {
      (void)fs.remove(part);
      return Status::corrupt(o.url.str() + ": checksum mismatch: expected sha256 " + expected +
                             ", got " + report.sha256 + " (the partial file was deleted)");
    }
    report.verified = true;
  }
  report.bytes = file_size(fs, part);
  KEEL_TRY(fs.rename(part, o.path));
  return report;
}

}  // namespace

Result<DownloadReport> download(FileSystem& fs, const DownloadOptions& options) {
  if (!options.expected_sha256.empty() && !is_sha256_hex(options.expected_sha256)) {
    return Status::invalid_argument("--sha256 must be 64 hex characters");
  }
  DownloadReport report;
  Attempt a{fs, options, options.path + ".part", 0, 0, {}, &report, nullptr};
  auto backoff = options.retry_backoff;
  Status last;
  for (report.attempts = 1; report.attempts <= std::max(1, options.max_attempts);
       ++report.attempts) {
    a.have = file_size(fs, a.part);
    last = a.run();
    if (last.ok()) return verify_and_publish(fs, options, a.part, a.server_sha256, report);
    if (!retryable(last)) return last;
    KEEL_LOG_WARN("download of {} interrupted after {} bytes ({}); retrying", options.url.str(),
                  a.have, last.message());
    std::this_thread::sleep_for(backoff);
    backoff *= 2;
  }
  report.attempts = std::max(1, options.max_attempts);
  return Status::unavailable(options.url.str() + ": gave up after " +
                             std::to_string(report.attempts) + " attempts: " + last.message());
}

}  // namespace keel::pull
