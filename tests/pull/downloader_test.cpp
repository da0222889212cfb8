// download() against TestHttpServer: a whole file; a resumed .part (Range); connections dropped
// mid-body (retried from where they stopped, ending byte-exact); a server ignoring Range;
// redirects; checksums (given, from X-Linked-ETag, wrong → Corrupt, nothing published); 404;
// retries running out.
#include "pull/downloader.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "pull/sha256.h"
#include "support/test_support.h"
#include "test_http_server.h"

namespace keel::pull {
namespace {

using keel::testing::TestHttpServer;
using keel::testing::TestHttpServerOptions;

std::string content(size_t n) {
  std::string s(n, '\0');
  uint32_t x = 12345;
  for (char& c : s) {
    x = x * 1103515245u + 12345u;
    c = static_cast<char>(x >> 24);
  }
  return s;
}

std::string sha_of(const std::string& s) {
  Sha256 h;
  h.update({reinterpret_cast<const std::byte*>(s.data()), s.size()});
  return h.finish_hex();
}

DownloadOptions options(const TestHttpServer& server, const std::string& path,
                        const std::string& dir) {
  DownloadOptions o;
  o.url = *net::parse_url(server.url(path));
  o.path = dir + "/model.gguf";
  o.retry_backoff = std::chrono::milliseconds(1);
  o.io_timeout = std::chrono::milliseconds(10000);
  return o;
}

TEST(DownloaderTest, WholeFileWithServerChecksum) {
  const std::string data = content(3 << 20);
  TestHttpServer server({.content = data, .etag = sha_of(data)});
  const std::string dir = keel::testing::make_temp_dir("dl-whole");
  PosixFileSystem fs;
  uint64_t last_progress = 0;
  DownloadOptions o = options(server, "/m/model.gguf", dir);
  o.progress = [&](uint64_t done, uint64_t) { last_progress = done; };
  Result<DownloadReport> r = download(fs, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(keel::testing::read_file(o.path), data);
  EXPECT_TRUE(r->verified);
  EXPECT_EQ(r->attempts, 1);
  EXPECT_EQ(r->bytes, data.size());
  EXPECT_EQ(last_progress, data.size());
  EXPECT_FALSE(std::filesystem::exists(o.path + ".part"));
}

TEST(DownloaderTest, ResumesAPartFileWithARangeRequest) {
  const std::string data = content(1 << 20);
  TestHttpServer server({.content = data});
  const std::string dir = keel::testing::make_temp_dir("dl-resume");
  DownloadOptions o = options(server, "/m/model.gguf", dir);
  std::ofstream(o.path + ".part", std::ios::binary) << data.substr(0, 300000);
  o.expected_sha256 = sha_of(data);
  PosixFileSystem fs;
  Result<DownloadReport> r = download(fs, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(keel::testing::read_file(o.path), data);
  EXPECT_TRUE(r->resumed);
  EXPECT_EQ(r->bytes_transferred, data.size() - 300000);
  EXPECT_EQ(server.ranges(), std::vector<std::string>{"bytes=300000-"});
}

TEST(DownloaderTest, DroppedConnectionsAreResumedWhereTheyStopped) {
  const std::string data = content(2 << 20);
  TestHttpServer server({.content = data, .drops = 2, .drop_after = 400000});
  const std::string dir = keel::testing::make_temp_dir("dl-drop");
  DownloadOptions o = options(server, "/m/model.gguf", dir);
  o.expected_sha256 = sha_of(data);
  PosixFileSystem fs;
  Result<DownloadReport> r = download(fs, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(keel::testing::read_file(o.path), data);
  EXPECT_EQ(r->attempts, 3);
  EXPECT_TRUE(r->resumed);
  EXPECT_EQ(r->bytes_transferred, data.size());  // nothing fetched twice
  EXPECT_EQ(server.ranges(), (std::vector<std::string>{"", "bytes=400000-", "bytes=800000-"}));
}

TEST(DownloaderTest, RetriesRunOut) {
  const std::string data = content(1 << 20);
  TestHttpServer server({.content = data, .drops = 10, .drop_after = 1000});
  const std::string dir = keel::testing::make_temp_dir("dl-giveup");
  DownloadOptions o = options(server, "/m/model.gguf", dir);
  o.max_attempts = 3;
  PosixFileSystem fs;
  Result<DownloadReport> r = download(fs, o);
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("3 attempts"), std::string::npos) << r.status().message();
  EXPECT_FALSE(std::filesystem::exists(o.path));
  // The .part keeps what arrived, for the next try.
  EXPECT_EQ(std::filesystem::file_size(o.path + ".part"), 3000u);
}

TEST(DownloaderTest, AServerIgnoringRangeStartsTheFileOver) {
  const std::string data = content(500000);
  TestHttpServer server({.content = data, .ignore_range = true});
  const std::string dir = keel::testing::make_temp_dir("dl-norange");
  DownloadOptions o = options(server, "/m/model.gguf", dir);
  std::ofstream(o.path + ".part", std::ios::binary) << std::string(1000, 'x');
  PosixFileSystem fs;
  Result<DownloadReport> r = download(fs, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(keel::testing::read_file(o.path), data);
}

TEST(DownloaderTest, FollowsRedirects) {
  const std::string data = content(100000);
  TestHttpServer server({.content = data});
  const std::string dir = keel::testing::make_temp_dir("dl-redirect");
  PosixFileSystem fs;
  Result<DownloadReport> r = download(fs, options(server, "/r/model.gguf", dir));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(keel::testing::read_file(dir + "/model.gguf"), data);
}

TEST(DownloaderTest, WrongChecksumPublishesNothing) {
  const std::string data = content(200000);
  PosixFileSystem fs;
  {  // given by the caller
    TestHttpServer server({.content = data});
    const std::string dir = keel::testing::make_temp_dir("dl-badsum");
    DownloadOptions o = options(server, "/m/model.gguf", dir);
    o.expected_sha256 = sha_of("something else");
    Result<DownloadReport> r = download(fs, o);
    EXPECT_EQ(r.status().code(), StatusCode::kCorrupt);
    EXPECT_NE(r.status().message().find("checksum mismatch"), std::string::npos);
    EXPECT_FALSE(std::filesystem::exists(o.path));
    EXPECT_FALSE(std::filesystem::exists(o.path + ".part"));
  }
  {  // announced by the server
    TestHttpServer server({.content = data, .etag = sha_of("other")});
    const std::string dir = keel::testing::make_temp_dir("dl-badetag");
    DownloadOptions o = options(server, "/m/model.gguf", dir);
    EXPECT_EQ(download(fs, o).status().code(), StatusCode::kCorrupt);
    EXPECT_FALSE(std::filesystem::exists(o.path));
  }
  DownloadOptions o;
  o.expected_sha256 = "abc";
  EXPECT_EQ(download(fs, o).status().code(), StatusCode::kInvalidArgument);
}

TEST(DownloaderTest, NotFoundAndUnreachable) {
  TestHttpServer server({.content = "x"});
  const std::string dir = keel::testing::make_temp_dir("dl-404");
  PosixFileSystem fs;
  EXPECT_EQ(download(fs, options(server, "/nothing.gguf", dir)).status().code(),
            StatusCode::kNotFound);
  DownloadOptions o = options(server, "/m/model.gguf", dir);
  server.stop();
  o.max_attempts = 2;
  EXPECT_EQ(download(fs, o).status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace keel::pull
