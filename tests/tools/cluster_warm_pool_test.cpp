// The warm pool and the model store through the keel binary, on loopback with bounded waits:
// `keel cluster preload` builds the store entry; a warm TE (`keel te --warm`) bound to it maps it
// (from_store) and reports its scale-out phases in order; a TE bound to a missing or a truncated
// entry falls back to the file and says why; `keel cluster up --warm-pool 1 --store-dir` scales
// out on `keel cluster scale` — its entry is a sealed memfd, which every TE's /proc/PID/maps
// shows it runs from; the new TE joins the fleet and serves, its phases show in /metrics and the
// event log — and removes the entry it built when it stops. Fork: two warm TEs, each with
// its own store directory (a host without the entry), fork the entry from a running TE by chain
// relay, map it, and the forked entry generates the same greedy text as the source's; a source
// whose weights service flips a byte makes the fork fail (hash mismatch), the TE load the file,
// and nothing stay in its store. A warm TE's /health (--health-port) says "warm", then follows its
// engine once bound. A bad `keel te --spec` is a one-line error. `keel cluster up --te-stores`
// binds a warm TE whose store lacks the entry by a fork from the running TE (--bind-source auto),
// and the forked TE serves the source's greedy text. Children are stopped by PID.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_runner.h"
#include "cluster/protocol/te_spec.h"
#include "control/scaleout/warm_pool.h"
#include "net/link.h"
#include "proc/process_supervisor.h"
#include "proc/ready_line.h"
#include "serve_process.h"
#include "support/test_support.h"

namespace keel::testing {
namespace {

using nlohmann::json;

std::string stories() { return shared_path("models/stories260K/stories260K.gguf"); }

// The one entry in `dir` (its file name), or "".
std::string only_entry(const std::string& dir) {
  std::string found;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("keel-store-", 0) == 0) {
      EXPECT_TRUE(found.empty()) << "more than one entry in " << dir;
      found = name;
    }
  }
  return found;
}

// A warm TE by flags, as a user starts one by hand.
std::vector<std::string> warm_argv(const std::string& store_dir) {
  return {KEEL_BINARY, "te",  "--warm",           "--port",  "0",           "-t",     "1",
          "-c",        "128", "--kv-cache-bytes", "8388608", "--store-dir", store_dir};
}

// The same warm TE as a spec, as the pool starts it (keel te --spec -).
cluster::TeSpec warm_spec(const std::string& store_dir) {
  cluster::TeSpec spec;
  spec.warm = true;
  spec.threads = 1;
  spec.engine.ctx_size = 128;
  spec.engine.kv_cache_bytes = 8388608;
  spec.store_dir = store_dir;
  return spec;
}

control::WarmPoolConfig pool_config(cluster::TeSpec spec, const std::string& name,
                                    const std::string& store_root = "") {
  control::WarmPoolConfig c;
  c.keel_command = {KEEL_BINARY};
  c.spec = std::move(spec);
  c.name_prefix = name;
  c.start_timeout = std::chrono::seconds(60);
  c.bind_timeout = std::chrono::seconds(120);
  c.store_root = store_root;
  return c;
}

void expect_phases_in_order(const cluster::ScaleOutPhases& p) {
  EXPECT_GT(p.decision_ns, 0);
  EXPECT_LE(p.decision_ns, p.bound_ns);
  EXPECT_LE(p.bound_ns, p.preloaded_ns);
  EXPECT_LE(p.preloaded_ns, p.loaded_ns);
  EXPECT_LE(p.loaded_ns, p.first_token_ns);
  EXPECT_LE(p.first_token_ns, p.announced_ns);
}

class WarmPoolE2e : public ::testing::Test {
 protected:
  void SetUp() override {
    KEEL_REQUIRE_SHARED();
    store_ = make_temp_dir("warm-pool-store");
  }
  std::string store_;
};

// `keel te|je|pp-stage --spec FILE` (the starters use stdin, "-"): a spec of a newer version, one
// that is not JSON or has an unknown field, or a flag beside it is a one-line error and a non-zero
// exit, before anything starts.
TEST(TeSpecCli, BadSpecsAndFlagsBesideOneAreOneLineErrors) {
  const std::string dir = make_temp_dir("te-spec-cli");
  const auto write = [&dir](const std::string& name, const std::string& text) {
    std::ofstream(dir + "/" + name) << text;
    return dir + "/" + name;
  };
  cluster::TeSpec spec;
  spec.model_path = "/nonexistent.gguf";
  nlohmann::json newer = cluster::encode_te_spec(spec);
  newer["v"] = cluster::kTeSpecVersion + 1;
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"te", "--spec", write("newer.json", newer.dump())}, "newer than this keel reads"},
      {{"te", "--spec", write("flags.json", "--max-num-seqs 8")}, "not JSON"},
      {{"te", "--spec", dir + "/absent.json"}, "cannot open"},
      {{"te", "--spec", write("ok.json", cluster::te_spec_text(spec)), "--id", "x"},
       "--id x is not the spec's id te-0"},
      {{"te", "--spec", dir + "/ok.json", "--id", "te-0", "--role", "decode"},
       "--role goes without it"},
      {{"pp-stage", "--spec", dir + "/ok.json", "-t", "2"}, "--threads goes without it"},
      {{"pp-stage"}, "-m or --spec is required"},
      {{"je"}, "-m or --spec is required"},
      {{"je", "--spec", write("je.json", "{\"v\":1,\"model_path\":\"/m.gguf\",\"x\":1}")},
       "je spec: 'x' is not a field of version 1"},
      {{"je", "--spec", write("je-ok.json", "{\"v\":1,\"model_path\":\"/m.gguf\"}"), "--router",
        "prefix"},
       "--router goes without it"}};
  for (const auto& [args, want] : cases) {
    const CliResult r = run_keel(args);
    EXPECT_NE(r.exit_code, 0) << args[0];
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(want), std::string::npos) << r.err;
  }
  std::filesystem::remove_all(dir);
}

TEST_F(WarmPoolE2e, WarmTeMapsThePreloadedEntryOrFallsBackToTheFile) {
  const CliResult pre = run_keel({"cluster", "preload", "-m", stories(), "--store-dir", store_});
  ASSERT_EQ(pre.exit_code, 0) << pre.err;
  EXPECT_NE(pre.out.find("preloaded"), std::string::npos) << pre.out;
  const std::string entry = only_entry(store_);
  ASSERT_FALSE(entry.empty());

  proc::ProcessSupervisor sup({.sink = [](std::string_view, std::string_view) {}});
  control::WarmPool pool(&sup, pool_config(warm_spec(store_), "warm-te"));
  ASSERT_TRUE(pool.refill(3).ok());
  EXPECT_EQ(pool.idle(), 3u);

  cluster::BindModel bind{stories(), entry, "colocated", cluster::steady_now_ns()};
  auto bound = pool.bind(1, bind);
  ASSERT_EQ(bound.size(), 1u);
  ASSERT_TRUE(bound[0].ok()) << bound[0].status().to_string();
  EXPECT_TRUE(bound[0]->reply.from_store) << bound[0]->reply.store_note;
  expect_phases_in_order(bound[0]->reply.phases);
  auto link = net::Link::connect(
      bound[0]->address, std::chrono::seconds(5), [](net::Link&, net::Message) {}, nullptr);
  EXPECT_TRUE(link.ok()) << "the bound TE's control port answers";
  if (link.ok()) (*link)->close();

  // An entry name the store does not hold: the file.
  std::string missing = entry;
  missing[std::string("keel-store-").size()] = missing[11] == '0' ? '1' : '0';
  auto from_file = pool.bind(1, {stories(), missing, "colocated", cluster::steady_now_ns()});
  ASSERT_TRUE(from_file[0].ok()) << from_file[0].status().to_string();
  EXPECT_FALSE(from_file[0]->reply.from_store);
  EXPECT_NE(from_file[0]->reply.store_note.find("no entry"), std::string::npos)
      << from_file[0]->reply.store_note;

  // A truncated entry: the file, and the reason names the entry.
  const std::string path = store_ + "/" + entry;
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
  auto corrupt = pool.bind(1, {stories(), entry, "colocated", cluster::steady_now_ns()});
  ASSERT_TRUE(corrupt[0].ok()) << corrupt[0].status().to_string();
  EXPECT_FALSE(corrupt[0]->reply.from_store);
  EXPECT_NE(corrupt[0]->reply.store_note.find(entry), std::string::npos)
      << corrupt[0]->reply.store_note;
  EXPECT_TRUE(sup.stop_all(std::chrono::seconds(5)).ok());
}

// `keel te --warm --health-port 0`: its /health says "warm" before the bind and, bound, judges the
// engine's progress ("healthy" while idle); the ready line names the health port.
TEST_F(WarmPoolE2e, AWarmTesHealthEndpointFollowsItsBind) {
  proc::ProcessSupervisor sup({.sink = [](std::string_view, std::string_view) {}});
  proc::ChildSpec spec;
  spec.name = "warm-health";
  spec.argv = warm_argv(store_);
  spec.argv.insert(spec.argv.end(), {"--health-port", "0", "--health-hang-ms", "2000"});
  spec.ready_timeout = std::chrono::seconds(60);
  auto te = sup.spawn(spec);
  ASSERT_TRUE(te.ok()) << te.status().to_string();
  ASSERT_TRUE(te->ready.contains("health_port")) << te->ready.dump();
  const int health = te->ready["health_port"].get<int>();
  const auto status = [&] {
    const HttpResponse r = http_request(health, "GET", "/health");
    return std::to_string(r.status) + " " +
           json::parse(r.body, nullptr, false).value("status", std::string("?"));
  };
  EXPECT_EQ(status(), "200 warm");

  auto link = net::Link::connect(
      "127.0.0.1:" + std::to_string(te->ready["port"].get<int>()), std::chrono::seconds(5),
      [](net::Link&, net::Message) {}, nullptr);
  ASSERT_TRUE(link.ok()) << link.status().to_string();
  const cluster::BindModel bind{stories(), "", "colocated", cluster::steady_now_ns()};
  Result<json> reply =
      (*link)->call(cluster::encode_bind_model(bind), std::chrono::milliseconds(60000));
  ASSERT_TRUE(reply.ok()) << reply.status().to_string();
  ASSERT_TRUE(cluster::decode_bind_reply(*reply).ok());
  EXPECT_TRUE(eventually([&] { return status() == "200 healthy"; }, std::chrono::seconds(5)))
      << status();
  (*link)->close();
  EXPECT_TRUE(sup.stop_all(std::chrono::seconds(10)).ok());
}

std::string greedy(const std::string& model) {
  const CliResult r =
      run_keel({"run", "-m", model, "-p", "Once upon a time", "-n", "24", "--temp", "0"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST_F(WarmPoolE2e, WarmTesForkTheEntryFromARunningTeByChainRelay) {
  const CliResult pre = run_keel({"cluster", "preload", "-m", stories(), "--store-dir", store_});
  ASSERT_EQ(pre.exit_code, 0) << pre.err;
  const std::string entry = only_entry(store_);
  ASSERT_FALSE(entry.empty());
  proc::ProcessSupervisor sup({.sink = [](std::string_view, std::string_view) {}});
  auto source_pool = [&](const std::string& name, const std::string& weights_fault) {
    cluster::TeSpec spec = warm_spec(store_);
    spec.weights_fault = weights_fault;
    return control::WarmPool(&sup, pool_config(spec, name));
  };
  control::WarmPool sources = source_pool("source", "");
  ASSERT_TRUE(sources.refill(1).ok());
  auto source = sources.bind(1, {stories(), entry, "colocated", cluster::steady_now_ns()});
  ASSERT_TRUE(source[0].ok()) << source[0].status().to_string();
  ASSERT_TRUE(source[0]->reply.from_store);
  ASSERT_FALSE(source[0]->weights_address.empty()) << "a TE with a store serves its weights";

  const std::string hosts = make_temp_dir("fork-hosts");
  // No store of their own: the pool gives each one under `hosts`.
  control::WarmPool targets(&sup, pool_config(warm_spec(""), "target", hosts));
  ASSERT_TRUE(targets.refill(3).ok());
  cluster::BindModel bind{stories(), entry, "colocated", cluster::steady_now_ns(),
                          source[0]->weights_address};
  auto forked = targets.bind_chain(2, bind);
  ASSERT_EQ(forked.size(), 2u);
  const std::string source_bytes = read_file(store_ + "/" + entry);
  for (const auto& te : forked) {
    ASSERT_TRUE(te.ok()) << te.status().to_string();
    EXPECT_TRUE(te->reply.forked) << te->reply.fork_error;
    EXPECT_TRUE(te->reply.from_store) << te->reply.store_note;
    EXPECT_EQ(te->reply.fork_bytes, source_bytes.size());
    expect_phases_in_order(te->reply.phases);
    const std::string dir = hosts + "/" + te->name;
    EXPECT_EQ(only_entry(dir), entry);
    EXPECT_TRUE(read_file(dir + "/" + entry) == source_bytes) << te->name << ": bytes differ";
  }
  EXPECT_EQ(greedy(hosts + "/" + forked[1]->name + "/" + entry), greedy(store_ + "/" + entry))
      << "the forked entry generates the source's greedy text";

  // A source that flips a byte of chunk 0: the fork fails on the entry hash, the TE loads the
  // file, and its store holds nothing.
  control::WarmPool bad_sources = source_pool("bad-source", "flip:0");
  ASSERT_TRUE(bad_sources.refill(1).ok());
  auto bad = bad_sources.bind(1, {stories(), entry, "colocated", cluster::steady_now_ns()});
  ASSERT_TRUE(bad[0].ok()) << bad[0].status().to_string();
  bind.fork_from = bad[0]->weights_address;
  auto fallback = targets.bind(1, bind);
  ASSERT_TRUE(fallback[0].ok()) << fallback[0].status().to_string();
  EXPECT_FALSE(fallback[0]->reply.forked);
  EXPECT_FALSE(fallback[0]->reply.from_store);
  EXPECT_NE(fallback[0]->reply.fork_error.find("content hash mismatch"), std::string::npos)
      << fallback[0]->reply.fork_error;
  EXPECT_TRUE(std::filesystem::is_empty(hosts + "/" + fallback[0]->name))
      << "no entry and no partial file";
  EXPECT_TRUE(sup.stop_all(std::chrono::seconds(10)).ok());
  std::filesystem::remove_all(hosts);
}

TEST_F(WarmPoolE2e, ClusterUpScalesOutFromTheWarmPool) {
  const std::string log = store_ + "/../warm-pool-events.jsonl";
  std::filesystem::remove(log);
  proc::ProcessSupervisor sup({.sink = [](std::string_view, std::string_view) {}});
  proc::ChildSpec spec;
  spec.name = "cluster";
  spec.argv = {KEEL_BINARY, "cluster",
               "up",        "-m",
               stories(),   "--served-model-name",
               "stories",   "--port",
               "0",         "--colocated",
               "1",         "--threads-per-te",
               "1",         "-c",
               "128",       "--warm-pool",
               "1",         "--store-dir",
               store_,      "--event-log",
               log,         "--kv-cache-bytes",
               "8388608"};
  spec.ready_timeout = std::chrono::seconds(60);
  auto child = sup.spawn(spec);
  ASSERT_TRUE(child.ok()) << child.status().to_string();
  const int port = *proc::ready_port(child->ready);
  ASSERT_TRUE(child->ready.contains("control_port")) << child->ready.dump();
  const std::string entry = only_entry(store_);
  ASSERT_FALSE(entry.empty()) << "cluster up preloads the model";
  // A sealed memfd of the manager, named by a link (store/sealed_holder.h).
  EXPECT_TRUE(std::filesystem::is_symlink(store_ + "/" + entry));
  const int fd = ::open((store_ + "/" + entry).c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(::fcntl(fd, F_GET_SEALS), F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
  ::close(fd);

  const CliResult scale =
      run_keel({"cluster", "scale", "--control",
                "127.0.0.1:" + std::to_string(child->ready["control_port"].get<int>()), "--json"});
  ASSERT_EQ(scale.exit_code, 0) << scale.err << scale.out;
  const json reply = json::parse(scale.out, nullptr, false);
  ASSERT_EQ(reply["tes"].size(), 1u) << scale.out;
  EXPECT_TRUE(reply["tes"][0]["from_store"].get<bool>()) << scale.out;

  EXPECT_TRUE(eventually(
      [&] {
        const json s =
            json::parse(http_request(port, "GET", "/v1/cluster/status").body, nullptr, false);
        if (!s.contains("task_executors") || s["task_executors"].size() != 2) return false;
        for (const json& te : s["task_executors"]) {
          if (!te.value("healthy", false)) return false;
        }
        return true;
      },
      std::chrono::seconds(20)))
      << "the bound TE joins the fleet";
  // Every TE runs from the manager's sealed memfd: it shows in each one's /proc/PID/maps.
  const json fleet =
      json::parse(http_request(port, "GET", "/v1/cluster/status").body, nullptr, false);
  for (const json& te : fleet["task_executors"]) {
    std::ifstream maps("/proc/" + std::to_string(te["pid"].get<int64_t>()) + "/maps");
    std::stringstream text;
    text << maps.rdbuf();
    EXPECT_NE(text.str().find("/memfd:" + entry), std::string::npos) << te.dump();
  }
  const HttpResponse r = http_request(
      port, "POST", "/v1/completions",
      json{{"model", "stories"}, {"prompt", "Once upon a time"}, {"max_tokens", 4}}.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  const std::string metrics = http_request(port, "GET", "/metrics").body;
  EXPECT_NE(metrics.find("keel:scale_out_phase_seconds_count{phase=\"load\"} 1"), std::string::npos)
      << metrics.substr(0, 2000);
  std::ifstream events(log);
  std::string line;
  ASSERT_TRUE(static_cast<bool>(std::getline(events, line)));
  const json event = json::parse(line, nullptr, false);
  EXPECT_EQ(event["event"], "scale_out");
  EXPECT_TRUE(event["phases_s"].contains("pre_load"));

  ASSERT_TRUE(sup.stop(child->pid, std::chrono::seconds(20)).ok());
  EXPECT_TRUE(only_entry(store_).empty()) << "the cluster removes the entry it built";
}

// `keel cluster up` with a store per warm TE (--te-stores: hosts without the entry) and the
// default --bind-source auto: te-0 maps the preloaded shared store and serves the entry; `keel
// cluster scale` binds the warm TE, whose own store lacks the entry, by a fork from te-0. The
// forked TE serves requests (round-robin routing sends it every other one) with the same greedy
// text as te-0.
TEST_F(WarmPoolE2e, ClusterUpForksABoundTeFromARunningTe) {
  const std::string hosts = make_temp_dir("up-fork-hosts");
  const std::string log = hosts + "/events.jsonl";
  proc::ProcessSupervisor sup({.sink = [](std::string_view, std::string_view) {}});
  proc::ChildSpec spec;
  spec.name = "cluster";
  spec.argv = {KEEL_BINARY,   "cluster",
               "up",          "-m",
               stories(),     "--served-model-name",
               "stories",     "--port",
               "0",           "--colocated",
               "1",           "--threads-per-te",
               "1",           "-c",
               "128",         "--warm-pool",
               "1",           "--store-dir",
               store_,        "--te-stores",
               hosts,         "--router",
               "round_robin", "--event-log",
               log,           "--kv-cache-bytes",
               "8388608"};
  spec.ready_timeout = std::chrono::seconds(60);
  auto child = sup.spawn(spec);
  ASSERT_TRUE(child.ok()) << child.status().to_string();
  const int port = *proc::ready_port(child->ready);
  const std::string entry = only_entry(store_);
  ASSERT_FALSE(entry.empty()) << "cluster up preloads the model";

  const CliResult scale =
      run_keel({"cluster", "scale", "--control",
                "127.0.0.1:" + std::to_string(child->ready["control_port"].get<int>()), "--json"});
  ASSERT_EQ(scale.exit_code, 0) << scale.err << scale.out;
  const json reply = json::parse(scale.out, nullptr, false);
  ASSERT_EQ(reply["tes"].size(), 1u) << scale.out;
  const json& te = reply["tes"][0];
  EXPECT_EQ(te.value("bind_source", ""), "fork") << scale.out;
  EXPECT_TRUE(te.value("forked", false)) << scale.out;
  EXPECT_TRUE(te.value("from_store", false)) << "it maps the entry it forked: " << scale.out;
  const std::string te_name = te.value("te", "");
  EXPECT_EQ(only_entry(hosts + "/" + te_name), entry) << "the fork landed in the TE's own store";

  ASSERT_TRUE(eventually(
      [&] {
        const json s =
            json::parse(http_request(port, "GET", "/v1/cluster/status").body, nullptr, false);
        if (!s.contains("task_executors") || s["task_executors"].size() != 2) return false;
        for (const json& t : s["task_executors"]) {
          if (!t.value("healthy", false)) return false;
        }
        return true;
      },
      std::chrono::seconds(20)))
      << "the forked TE joins the fleet";
  std::vector<std::string> texts;
  for (int i = 0; i < 4; ++i) {
    const HttpResponse r = http_request(port, "POST", "/v1/completions",
                                        json{{"model", "stories"},
                                             {"prompt", "Once upon a time"},
                                             {"max_tokens", 16},
                                             {"temperature", 0}}
                                            .dump());
    ASSERT_EQ(r.status, 200) << r.body;
    texts.push_back(json::parse(r.body)["choices"][0]["text"].get<std::string>());
  }
  for (const std::string& t : texts) EXPECT_EQ(t, texts[0]) << "greedy text differs between TEs";
  EXPECT_FALSE(texts[0].empty());
  json s;
  EXPECT_TRUE(eventually(  // the TEs' stats arrive with their next load reports
      [&] {
        s = json::parse(http_request(port, "GET", "/v1/cluster/status").body, nullptr, false);
        if (!s.contains("task_executors") || s["task_executors"].size() != 2) return false;
        for (const json& t : s["task_executors"]) {
          if (t.value("generation_tokens_total", int64_t{0}) <= 0) return false;
        }
        return true;
      },
      std::chrono::seconds(10)))
      << "both TEs (the source and the forked one) generated: " << s.dump();
  ASSERT_TRUE(sup.stop(child->pid, std::chrono::seconds(20)).ok());
  std::filesystem::remove_all(hosts);
}

}  // namespace
}  // namespace keel::testing
