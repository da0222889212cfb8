// The Batch API across restarts (ServerConfig::state_dir) against the fake engine: a server
// stopped mid-batch and started again on the same directory resumes the batch, runs only the
// lines that had not finished and answers every line exactly once; files survive, and a deleted
// input file stays readable for the batch that still needs it (its bytes go when the batch
// ends); a batch left cancelling ends cancelled, one past its completion window ends expired
// (unstarted lines in the error file as batch_expired), one left finalizing writes its files
// under the ids it had planned; a second server on a locked directory is refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "batch_test_client.h"
#include "server/batch_store.h"
#include "server/file_store.h"
#include "server_harness.h"
#include "state/state_store.h"
#include "support/test_support.h"

namespace keel::server::testing {
namespace {

using Json = nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kRestartEndpoint = "/v1/completions";
constexpr int32_t kStall = 7;  // max_tokens of a line the first server never finishes

ServerConfig durable_config(const std::string& dir) {
  ServerConfig c = test_config();
  c.batch_concurrency = 2;
  c.state_dir = dir;
  return c;
}

// Lines that stall (max_tokens kStall) stay in "prefill" until aborted when `stall` is set.
void restart_script(FakeEngine& engine, bool stall) {
  engine.set_script([stall](const engine::GenerationRequest& r) {
    FakeScript s;
    s.tokens = {kHello, kWorld};
    if (stall && r.max_tokens == kStall) s.stall = FakeScript::Stall::kPrefill;
    return s;
  });
}

Json restart_line(int i, int32_t max_tokens) {
  return batch_line("req-" + std::to_string(i), kRestartEndpoint,
                    {{"prompt", "Hello"}, {"max_tokens", max_tokens}});
}

std::set<std::string> answered_ids(const std::vector<Json>& lines) {
  std::set<std::string> ids;
  for (const Json& l : lines) ids.insert(l["custom_id"].get<std::string>());
  return ids;
}

TEST(BatchRestartTest, StoppedServerResumesTheBatchRunningOnlyUnfinishedLines) {
  const std::string dir = keel::testing::make_temp_dir("batch_restart");
  std::vector<Json> lines;
  for (int i = 0; i < 6; ++i) lines.push_back(restart_line(i, 4));
  for (int i = 6; i < 10; ++i) lines.push_back(restart_line(i, kStall));
  std::string batch_id, input_id;
  {
    ServerHarness first(durable_config(dir));
    restart_script(first.engine(), /*stall=*/true);
    HttpResult created = create_batch(first.port(), lines, kRestartEndpoint);
    ASSERT_EQ(created.status, 200) << created.body;
    batch_id = created.json()["id"];
    input_id = created.json()["input_file_id"];
    // Lines run oldest first, two at a time: 6 finish, 2 stall in flight, 2 never start.
    ASSERT_TRUE(keel::testing::eventually([&] {
      const Json b = http_request(first.port(), "GET", "/v1/batches/" + batch_id).json();
      return b["request_counts"]["completed"] == 6 && first.engine().num_active() == 2;
    }));
    first.server().shutdown();  // the stalled lines are aborted, the batch stays on disk
    EXPECT_EQ(first.engine().submitted().size(), 8u);
  }
  ServerHarness second(durable_config(dir));
  restart_script(second.engine(), /*stall=*/false);
  const Json b = wait_batch_done(second.port(), batch_id);
  ASSERT_EQ(b["status"], "completed") << b.dump();
  EXPECT_EQ(b["request_counts"], Json({{"total", 10}, {"completed", 10}, {"failed", 0}}));
  EXPECT_EQ(second.engine().submitted().size(), 4u);  // only the lines that had not finished
  const std::vector<Json> out = file_lines(second.port(), b["output_file_id"]);
  ASSERT_EQ(out.size(), 10u);  // each line once
  EXPECT_EQ(answered_ids(out).size(), 10u);
  for (const Json& l : out) EXPECT_EQ(l["response"]["status_code"], 200) << l.dump();
  // The input file survived too; the progress log is gone once the batch ended.
  EXPECT_EQ(http_request(second.port(), "GET", "/v1/files/" + input_id).status, 200);
  EXPECT_TRUE(keel::testing::eventually(  // removed right after the status changed
      [&] { return !std::filesystem::exists(dir + "/batches/" + batch_id + ".log"); }));
}

TEST(BatchRestartTest, DeletedInputStaysReadableUntilTheResumedBatchEnds) {
  const std::string dir = keel::testing::make_temp_dir("batch_restart");
  std::string batch_id, input_id;
  {
    ServerHarness first(durable_config(dir));
    restart_script(first.engine(), /*stall=*/true);
    HttpResult created =
        create_batch(first.port(), {restart_line(0, 4), restart_line(1, kStall)}, kRestartEndpoint);
    ASSERT_EQ(created.status, 200) << created.body;
    batch_id = created.json()["id"];
    input_id = created.json()["input_file_id"];
    ASSERT_TRUE(first.engine().wait_for_submits(2, 5s));
    EXPECT_EQ(http_request(first.port(), "DELETE", "/v1/files/" + input_id).status, 200);
  }
  EXPECT_TRUE(std::filesystem::exists(dir + "/files/" + input_id + ".blob"));
  ServerHarness second(durable_config(dir));
  restart_script(second.engine(), /*stall=*/false);
  EXPECT_EQ(http_request(second.port(), "GET", "/v1/files/" + input_id).status, 404);
  const Json b = wait_batch_done(second.port(), batch_id);
  ASSERT_EQ(b["status"], "completed") << b.dump();
  EXPECT_EQ(answered_ids(file_lines(second.port(), b["output_file_id"])),
            (std::set<std::string>{"req-0", "req-1"}));
  EXPECT_TRUE(keel::testing::eventually(  // removed right after the status changed
      [&] { return !std::filesystem::exists(dir + "/files/" + input_id + ".blob"); }));
}

// A state directory holding a batch as a process that stopped at some point left it.
class SeededState {
 public:
  explicit SeededState(const std::string& dir) {
    Result<std::unique_ptr<state::StateStore>> opened = state::StateStore::open(&fs_, dir);
    EXPECT_TRUE(opened.ok()) << opened.status().message();
    state_ = std::move(*opened);
    EXPECT_TRUE(files_.attach(state_.get()).ok());
    EXPECT_TRUE(batches_.attach(state_.get()).ok());
  }
  // Uploads `n` lines (answered_ids req-0..) and adds a batch over them in `status`.
  BatchRecord add_batch(int n, BatchStatus status, int64_t expires_at) {
    std::vector<Json> lines;
    for (int i = 0; i < n; ++i) lines.push_back(restart_line(i, 4));
    ApiResult<StoredFile> input = files_.add("file-in", "batch", "in.jsonl", jsonl(lines), true);
    EXPECT_TRUE(input.ok());
    BatchRecord r;
    r.id = "batch_seeded";
    r.endpoint = kRestartEndpoint;
    r.input_file_id = "file-in";
    r.completion_window = "24h";
    r.status = status;
    r.created_at = expires_at - 86400;
    r.expires_at = expires_at;
    r.total = n;
    EXPECT_TRUE(batches_.add(r).ok());
    return r;
  }
  FileStore& files() { return files_; }
  BatchStore& batches() { return batches_; }

 private:
  PosixFileSystem fs_;
  std::unique_ptr<state::StateStore> state_;
  FileStore files_{1 << 20, 1 << 24};
  BatchStore batches_;
};

int64_t seconds_now() { return static_cast<int64_t>(std::time(nullptr)); }

std::string finished_line(const std::string& custom_id) {
  return Json({{"id", "batch_req_x"},
               {"custom_id", custom_id},
               {"response", {{"status_code", 200}}}})
      .dump();
}

TEST(BatchRestartTest, CancellingBatchEndsCancelledWithTheLinesThatFinished) {
  const std::string dir = keel::testing::make_temp_dir("batch_restart");
  {
    SeededState s(dir);
    s.add_batch(3, BatchStatus::kCancelling, seconds_now() + 3600);
    ASSERT_TRUE(
        s.batches().record_line("batch_seeded", {"req-1", true, finished_line("req-1")}).ok());
  }
  ServerHarness h(durable_config(dir));
  restart_script(h.engine(), false);
  const Json b = wait_batch_done(h.port(), "batch_seeded");
  ASSERT_EQ(b["status"], "cancelled") << b.dump();
  EXPECT_EQ(b["request_counts"], Json({{"total", 3}, {"completed", 1}, {"failed", 0}}));
  EXPECT_EQ(answered_ids(file_lines(h.port(), b["output_file_id"])),
            std::set<std::string>{"req-1"});
  EXPECT_TRUE(h.engine().submitted().empty());
}

TEST(BatchRestartTest, BatchPastItsCompletionWindowEndsExpired) {
  const std::string dir = keel::testing::make_temp_dir("batch_restart");
  {
    SeededState s(dir);
    s.add_batch(3, BatchStatus::kInProgress, seconds_now() - 10);
    ASSERT_TRUE(
        s.batches().record_line("batch_seeded", {"req-0", true, finished_line("req-0")}).ok());
  }
  ServerHarness h(durable_config(dir));
  restart_script(h.engine(), false);
  const Json b = wait_batch_done(h.port(), "batch_seeded");
  ASSERT_EQ(b["status"], "expired") << b.dump();
  EXPECT_TRUE(b["expired_at"].is_number());
  EXPECT_EQ(answered_ids(file_lines(h.port(), b["output_file_id"])),
            std::set<std::string>{"req-0"});
  const std::vector<Json> errs = file_lines(h.port(), b["error_file_id"]);
  EXPECT_EQ(answered_ids(errs), (std::set<std::string>{"req-1", "req-2"}));
  for (const Json& e : errs) EXPECT_EQ(e["error"]["code"], "batch_expired") << e.dump();
  EXPECT_TRUE(h.engine().submitted().empty());
}

TEST(BatchRestartTest, FinalizeRepeatedAfterACrashReplacesThePlannedFiles) {
  const std::string dir = keel::testing::make_temp_dir("batch_restart");
  {
    SeededState s(dir);
    s.add_batch(2, BatchStatus::kFinalizing, seconds_now() + 3600);
    for (const char* id : {"req-0", "req-1"}) {
      ASSERT_TRUE(s.batches().record_line("batch_seeded", {id, true, finished_line(id)}).ok());
    }
    s.batches().update("batch_seeded", [](BatchRecord& r) {
      r.planned_output_file_id = "file-out";
      r.planned_error_file_id = "file-err";
    });
    // The crash came after the output file was written, before the batch completed.
    ASSERT_TRUE(s.files().add("file-out", "batch_output", "old.jsonl", "stale\n", false).ok());
  }
  ServerHarness h(durable_config(dir));
  restart_script(h.engine(), false);
  const Json b = wait_batch_done(h.port(), "batch_seeded");
  ASSERT_EQ(b["status"], "completed") << b.dump();
  EXPECT_EQ(b["output_file_id"], "file-out");
  EXPECT_TRUE(b["error_file_id"].is_null());
  EXPECT_EQ(answered_ids(file_lines(h.port(), "file-out")),
            (std::set<std::string>{"req-0", "req-1"}));
  const Json list = http_request(h.port(), "GET", "/v1/files?purpose=batch_output").json();
  EXPECT_EQ(list["data"].size(), 1u) << list.dump();
  EXPECT_TRUE(h.engine().submitted().empty());
}

TEST(BatchRestartTest, SecondServerOnALockedDirectoryIsRefused) {
  const std::string dir = keel::testing::make_temp_dir("batch_restart");
  ServerHarness first(durable_config(dir));
  FakeEngine engine;
  const tokenizer::Tokenizer tok = make_test_tokenizer();
  ServerDeps deps;
  deps.engine = &engine;
  deps.tokenizer = &tok;
  Result<std::unique_ptr<Server>> second = Server::start(durable_config(dir), std::move(deps));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(second.status().message(), "server: --state-dir " + dir + ": state directory " + dir +
                                           " is in use by another process (it holds " + dir +
                                           "/LOCK)");
}

}  // namespace
}  // namespace keel::server::testing
