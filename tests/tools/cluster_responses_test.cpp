// Issue 39's stored responses across the gateways of a cluster: `keel cluster up` (gateway A) and
// `keel cluster gateway` (gateway B, over A's JE), both with one --responses-dir. A response
// created through B is retrieved and listed (input_items) through A and continued through A by
// previous_response_id; B restarts (SIGTERM by PID, started again on its directories) and the
// chain goes on through it, with the same prompt tokens as the same turn through A; a deletion
// through A is a 404 through B, and a chain through the deleted response 404
// previous_response_not_found. Every process is a child of a supervisor, stopped by PID; the
// gateways listen on free loopback ports.
#include <signal.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "proc/process_supervisor.h"
#include "proc/ready_line.h"
#include "ready_child.h"
#include "serve_process.h"
#include "support/test_support.h"

namespace keel::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

std::string stories() { return shared_path("models/stories260K/stories260K.gguf"); }

// Starts a child of `sup` (ready_child.h).
int start(proc::ProcessSupervisor& sup, const std::string& name, std::vector<std::string> argv,
          pid_t* pid) {
  return start_ready_child(sup, name, std::move(argv), pid);
}

// `keel cluster gateway` over the JE at `je`.
int start_gateway(proc::ProcessSupervisor& sup, const std::string& je, const std::string& state,
                  const std::string& responses, pid_t* pid) {
  return start(sup, "gateway-b",
               {KEEL_BINARY, "cluster", "gateway", "-m", stories(), "--served-model-name",
                "stories", "--je", je, "--port", "0", "--drain-timeout", "2", "--state-dir", state,
                "--responses-dir", responses},
               pid);
}

json post(int port, const json& body, int want = 200) {
  const HttpResponse r = http_request(port, "POST", "/v1/responses", body.dump());
  EXPECT_EQ(r.status, want) << r.body;
  return json::parse(r.body, nullptr, false);
}

json get(int port, const std::string& path, int want = 200) {
  const HttpResponse r = http_request(port, "GET", path);
  EXPECT_EQ(r.status, want) << path << ": " << r.body;
  return json::parse(r.body, nullptr, false);
}

json turn(const std::string& input, const std::string& previous = "") {
  json body = {
      {"model", "stories"}, {"input", input}, {"max_output_tokens", 6}, {"temperature", 0}};
  if (!previous.empty()) body["previous_response_id"] = previous;
  return body;
}

TEST(ClusterResponses, StoredResponsesAreSharedByTheGatewaysAndSurviveARestart) {
  KEEL_REQUIRE_SHARED();
  const std::string shared = make_temp_dir("cluster_responses");
  const std::string state_a = make_temp_dir("gateway_a_state");
  const std::string state_b = make_temp_dir("gateway_b_state");
  proc::ProcessSupervisor sup;
  pid_t pid_a = 0, pid_b = 0;
  const int a = start(sup, "cluster", {KEEL_BINARY, "cluster",
                                       "up",        "-m",
                                       stories(),   "--served-model-name",
                                       "stories",   "--colocated",
                                       "1",         "--jes",
                                       "1",         "--threads-per-te",
                                       "1",         "--port",
                                       "0",         "--drain-timeout",
                                       "2",         "--state-dir",
                                       state_a,     "--responses-dir",
                                       shared},
                      &pid_a);
  ASSERT_GT(a, 0);
  const json status = get(a, "/v1/cluster/status");
  ASSERT_TRUE(status.contains("job_executors")) << status.dump();
  const std::string je = status["job_executors"][0]["address"];
  int b = start_gateway(sup, je, state_b, shared, &pid_b);
  ASSERT_GT(b, 0);

  // Created through B; retrieved, listed and continued through A.
  const json r1 = post(b, turn("Once upon a time"));
  const std::string id1 = r1["id"];
  EXPECT_EQ(r1["store"], true);
  const json got = get(a, "/v1/responses/" + id1);
  EXPECT_EQ(got["id"], id1);
  EXPECT_EQ(got["output"], r1["output"]);
  const json items = get(a, "/v1/responses/" + id1 + "/input_items");
  ASSERT_EQ(items["data"].size(), 1u) << items.dump();
  EXPECT_EQ(items["data"][0]["content"][0]["text"], "Once upon a time");
  const json r2 = post(a, turn("Then the cat", id1));
  const std::string id2 = r2["id"];
  EXPECT_EQ(r2["previous_response_id"], id1);
  EXPECT_GT(r2["usage"]["input_tokens"], r1["usage"]["input_tokens"]);
  EXPECT_TRUE(std::filesystem::exists(shared + "/responses/" + id1 + ".rec"));
  EXPECT_FALSE(std::filesystem::exists(state_a + "/responses/" + id2 + ".rec"));

  // B restarts on its directories: the chain goes on through it.
  ASSERT_TRUE(sup.stop(pid_b, 10s).ok());
  b = start_gateway(sup, je, state_b, shared, &pid_b);
  ASSERT_GT(b, 0);
  EXPECT_EQ(get(b, "/v1/responses/" + id2)["output"], r2["output"]);
  const json r3 = post(b, turn("The end", id2));
  const json r3_through_a = post(a, turn("The end", id2));
  EXPECT_EQ(r3["usage"]["input_tokens"], r3_through_a["usage"]["input_tokens"]);
  EXPECT_EQ(r3["output"][0]["content"][0]["text"], r3_through_a["output"][0]["content"][0]["text"]);

  // Deleted through A: gone through B, and so is every chain through it.
  const HttpResponse del = http_request(a, "DELETE", "/v1/responses/" + id1);
  ASSERT_EQ(del.status, 200) << del.body;
  EXPECT_EQ(json::parse(del.body)["deleted"], true);
  get(b, "/v1/responses/" + id1, 404);
  const json broken = post(b, turn("Again", id2), 404);
  EXPECT_EQ(broken["error"]["code"], "previous_response_not_found") << broken.dump();
  const json unknown = post(a, turn("Again", "resp_0123456789abcdef"), 404);
  EXPECT_EQ(unknown["error"]["code"], "previous_response_not_found");
  EXPECT_EQ(http_request(b, "DELETE", "/v1/responses/" + id1).status, 404);

  EXPECT_TRUE(sup.stop(pid_b, 10s).ok());
  EXPECT_TRUE(sup.stop(pid_a, 20s).ok());
}

}  // namespace
}  // namespace keel::testing
