// Many concurrent streams (and non-streamed requests) through one server all complete with the
// right content, each on its own connection, with distinct response ids.
#include <gtest/gtest.h>

#include <mutex>
#include <set>
#include <thread>

#include "server_harness.h"

namespace keel::server::testing {
namespace {

using Json = nlohmann::json;
using namespace std::chrono_literals;

TEST(ConcurrencyTest, ThirtyTwoStreamsAndSomePlainRequestsComplete) {
  ServerConfig cfg = test_config();
  cfg.io_threads = 3;
  ServerHarness h(cfg);
  h.engine().set_script([](const engine::GenerationRequest& r) {
    FakeScript s;
    // Each request's first prompt token after BOS picks its script length, so outputs differ.
    s.tokens = {kHello, kWorld, kBang, kThe, kEnd, kMore, kEos};
    s.token_delay = 1ms;
    (void)r;
    return s;
  });
  constexpr int kStreams = 32;
  constexpr int kPlain = 8;
  std::mutex mu;
  std::set<std::string> ids;
  std::vector<std::string> failures;
  auto fail = [&](std::string what) {
    std::lock_guard<std::mutex> lock(mu);
    failures.push_back(std::move(what));
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < kStreams + kPlain; ++i) {
    threads.emplace_back([&, i] {
      const bool stream = i < kStreams;
      Json body = {{"messages", Json::array({Json{{"role", "user"}, {"content", "Hi"}}})},
                   {"stream", stream},
                   {"max_tokens", 6}};
      HttpResult r = post_json(h.port(), "/v1/chat/completions", body);
      if (r.status != 200) return fail("status " + std::to_string(r.status) + " " + r.body);
      std::string content, id;
      if (stream) {
        std::vector<std::string> data = r.sse_data();
        if (data.empty() || data.back() != "[DONE]") return fail("no [DONE]");
        for (size_t k = 0; k + 1 < data.size(); ++k) {
          Json e = Json::parse(data[k]);
          id = e["id"];
          const Json& d = e["choices"][0]["delta"];
          if (d.contains("content")) content += d["content"].get<std::string>();
        }
      } else {
        Json j = r.json();
        id = j["id"];
        content = j["choices"][0]["message"]["content"];
      }
      if (content != " Hello world! The end more") return fail("content: " + content);
      std::lock_guard<std::mutex> lock(mu);
      ids.insert(id);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_TRUE(failures.empty()) << failures.size()
                                << " failures, first: " << (failures.empty() ? "" : failures[0]);
  EXPECT_EQ(ids.size(), static_cast<size_t>(kStreams + kPlain));
  EXPECT_EQ(h.engine().submitted().size(), static_cast<size_t>(kStreams + kPlain));
  EXPECT_EQ(h.engine().total_aborts(), 0);
}

}  // namespace
}  // namespace keel::server::testing
