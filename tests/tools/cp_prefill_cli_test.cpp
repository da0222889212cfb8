// `keel cp-prefill` end to end: two member processes over a loopback ring prefill the same prompt
// as one process alone and name the same next token, each holding half of the KV, then decode
// the same 24 greedy tokens with the KV sharded between them; a member whose
// member 0 never comes exits non-zero with a one-line error within its --timeout.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli_runner.h"

namespace keel::testing {
namespace {

// The JSON result line of a cp-prefill run (the ready line is skipped).
nlohmann::json result_of(const CliResult& r) {
  size_t at = 0;
  while (at < r.out.size()) {
    const size_t end = r.out.find('\n', at);
    const std::string line = r.out.substr(at, end == std::string::npos ? end : end - at);
    if (!line.empty() && line[0] == '{') return nlohmann::json::parse(line);
    if (end == std::string::npos) break;
    at = end + 1;
  }
  ADD_FAILURE() << "no result line in: " << r.out << r.err;
  return {};
}

uint16_t free_port() {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor a(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  return a.local_endpoint().port();
}

TEST(CpPrefillCli, TwoMembersNameTheSameNextTokenAsOneProcessWithHalfTheKvEach) {
  const std::vector<std::string> common = {
      "cp-prefill", "-m", KEEL_REPO_STORIES, "--tokens", "300",      "--seed", "5",
      "-t",         "1",  "--timeout",       "60",       "--decode", "24"};
  auto args = [&](std::vector<std::string> more) {
    std::vector<std::string> a = common;
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  const CliResult alone = run_keel(args({"--cp", "1"}));
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  const std::string addr = "127.0.0.1:" + std::to_string(free_port());
  CliResult m0;
  std::thread t0([&] { m0 = run_keel(args({"--cp", "2", "--rank", "0", "--listen", addr})); });
  const CliResult m1 =
      run_keel(args({"--cp", "2", "--rank", "1", "--listen", "127.0.0.1:0", "--join", addr}));
  t0.join();
  ASSERT_EQ(m0.exit_code, 0) << m0.err;
  ASSERT_EQ(m1.exit_code, 0) << m1.err;
  const auto a = result_of(alone), r0 = result_of(m0), r1 = result_of(m1);
  EXPECT_GE(a["next_token"].get<int>(), 0);
  EXPECT_EQ(r0["next_token"], a["next_token"]);
  EXPECT_EQ(r0["positions"].get<int>() + r1["positions"].get<int>(), 300);
  EXPECT_EQ(r0["positions"], r1["positions"]);
  EXPECT_GT(r1["rounds"][0]["bytes_sent"].get<int64_t>(), 0);
  // Then 24 greedy tokens with the KV sharded: the same on both members and as one process.
  ASSERT_EQ(a["generated"].size(), 24u);
  EXPECT_EQ(r0["generated"], a["generated"]);
  EXPECT_EQ(r1["generated"], a["generated"]);
}

TEST(CpPrefillCli, AMemberWhoseGroupNeverComesExitsWithAOneLineError) {
  const std::string addr = "127.0.0.1:" + std::to_string(free_port());  // nobody listens
  const CliResult r = run_keel({"cp-prefill", "-m", KEEL_REPO_STORIES, "--tokens", "64", "--cp",
                                "2", "--rank", "1", "--join", addr, "--timeout", "2"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("keel cp-prefill: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("context-parallel ring"), std::string::npos) << r.err;
  const CliResult bad =
      run_keel({"cp-prefill", "-m", KEEL_REPO_STORIES, "--cp", "2", "--rank", "1"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--join"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace keel::testing
