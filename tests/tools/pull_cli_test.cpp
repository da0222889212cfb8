// `keel pull` and remote `-m` references against a local HTTP server: a download that survives a
// dropped connection and is checked against --sha256; the cached file used offline by `keel run`;
// a Hugging Face-style reference through $HF_ENDPOINT; a wrong checksum → one-line error.
#include <gtest/gtest.h>

#include <filesystem>

#include "cli_runner.h"
#include "support/test_support.h"
#include "test_http_server.h"

namespace keel::testing {
namespace {

constexpr const char* kStoriesSha256 =
    "5a9d168bd9d9e29302e0d604e9a4c97184057ad87661cd7e7cc4318fdeba6d9c";

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

TEST(PullCliTest, PullResumesVerifiesAndServesFromTheCacheOffline) {
  const std::string model = read_file(KEEL_REPO_STORIES);
  const std::string home = make_temp_dir("pull-home");
  const std::vector<std::string> env = {"KEEL_HOME=" + home};
  std::string url;
  {
    TestHttpServer server({.content = model, .drops = 1, .drop_after = 400000});
    url = server.url("/m/stories260K.gguf");
    CliResult r = run_keel({"pull", url, "--sha256", kStoriesSha256}, env);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string path = trim(r.out);
    EXPECT_TRUE(path.starts_with(home + "/models/url/127.0.0.1_")) << path;
    EXPECT_EQ(read_file(path), model);
    EXPECT_NE(r.err.find("retrying"), std::string::npos) << r.err;  // the drop was resumed
    EXPECT_EQ(server.ranges(), (std::vector<std::string>{"", "bytes=400000-"}));
  }
  // The server is gone: the cached file serves `-m URL`, with the same text as the repo's file.
  const std::vector<std::string> args = {"-p", "Once upon a time", "-n", "8", "-t",
                                         "1",  "--temp",           "0"};
  std::vector<std::string> remote = {"run", "-m", url};
  remote.insert(remote.end(), args.begin(), args.end());
  CliResult a = run_keel(remote, env);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  std::vector<std::string> local = {"run", "-m", KEEL_REPO_STORIES};
  local.insert(local.end(), args.begin(), args.end());
  CliResult b = run_keel(local);
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(a.out, b.out);
}

TEST(PullCliTest, HuggingFaceReferenceAndWrongChecksum) {
  const std::string model = read_file(KEEL_REPO_STORIES);
  TestHttpServer server({.content = model, .etag = kStoriesSha256});
  const std::string home = make_temp_dir("pull-hf");
  const std::vector<std::string> env = {"KEEL_HOME=" + home, "HF_ENDPOINT=" + server.url("")};
  CliResult r = run_keel({"pull", "karpathy/tinyllamas/stories260K.gguf"}, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(trim(r.out), home + "/models/hf/karpathy/tinyllamas/main/stories260K.gguf");
  EXPECT_EQ(read_file(trim(r.out)), model);

  CliResult bad =
      run_keel({"pull", server.url("/m/other.gguf"), "--sha256", std::string(64, '0')}, env);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("checksum mismatch"), std::string::npos) << bad.err;
  const std::string other =
      home + "/models/url/127.0.0.1_" + std::to_string(server.port()) + "/m/other.gguf";
  EXPECT_FALSE(std::filesystem::exists(other));
  EXPECT_FALSE(std::filesystem::exists(other + ".part"));
  CliResult missing = run_keel({"pull", server.url("/absent.gguf")}, env);
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("404"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace keel::testing
