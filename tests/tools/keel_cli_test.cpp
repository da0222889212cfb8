// End-to-end tests of the keel binary: run, info and make-model, and the one-line errors for bad
// input (a GGUF cut in half, a flipped magic, a missing file, a prompt longer than the context),
// and keel bench (llama-bench JSON, --exit-predictors).
// Built with the sanitizers in the test preset, so a crash or sanitizer report fails the test.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_runner.h"
#include "gguf/reader.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"

namespace keel::testing {
namespace {

const std::string kStories = "models/stories260K/stories260K.gguf";

// Expects a clean failure: non-zero exit, exactly one stderr line naming `needle`, no sanitizer.
void expect_one_line_error(const CliResult& r, const std::string& needle) {
  EXPECT_NE(r.exit_code, 0);
  EXPECT_LT(r.exit_code, 128) << "killed by a signal";
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("Sanitizer"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("runtime error"), std::string::npos) << r.err;
}

std::string write_copy(const std::string& src, const std::string& name, size_t keep_bytes,
                       bool flip_magic) {
  std::string bytes = read_file(src);
  bytes.resize(std::min(bytes.size(), keep_bytes));
  if (flip_magic) bytes[0] = static_cast<char>(bytes[0] ^ 0xff);
  const std::string path = make_temp_dir("cli-corrupt") + "/" + name;
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

TEST(KeelCliTest, GreedyStoriesMatchesLlamaCpp) {
  KEEL_REQUIRE_SHARED();
  const auto ref =
      nlohmann::json::parse(read_file(shared_path("models/stories260K/reference/greedy.json")));
  const auto& first = ref["results"][0];
  ASSERT_EQ(first["prompt"], "Once upon a time");
  // The reference text of the first 32 generated ids, decoded by keel's tokenizer.
  auto file = gguf::GgufFile::open(shared_path(kStories), {.mode = gguf::DataMode::kNone});
  ASSERT_TRUE(file.ok());
  auto tok = tokenizer::Tokenizer::from_gguf(*file);
  ASSERT_TRUE(tok.ok());
  std::vector<int32_t> ids = first["gen_ids"].get<std::vector<int32_t>>();
  ids.resize(32);
  const std::string expected = tok->decode(ids, false);
  ASSERT_EQ(first["gen_text"].get<std::string>().rfind(expected, 0), 0u);

  CliResult r = run_keel({"run", "-m", shared_path(kStories), "-p", "Once upon a time", "-n", "32",
                          "--temp", "0", "-t", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, expected + "\n");
  // f16 KV: the same greedy text (model_test checks all 5 prompts × 64 ids).
  CliResult f16 = run_keel({"run", "-m", shared_path(kStories), "-p", "Once upon a time", "-n",
                            "32", "--temp", "0", "-t", "1", "--kv-type", "f16"});
  ASSERT_EQ(f16.exit_code, 0) << f16.err;
  EXPECT_EQ(f16.out, expected + "\n");
}

TEST(KeelCliTest, RunKeepsTheLeadingSpaceOfTheContinuation) {
  KEEL_REQUIRE_SHARED();
  const auto ref = nlohmann::json::parse(
      read_file(shared_path("models/stories260K/reference/greedy.json")))["results"][3];
  ASSERT_EQ(ref["prompt"], "One day, a boy named Tim");
  CliResult r = run_keel({"run", "-m", shared_path(kStories), "-p", ref["prompt"], "-n", "8",
                          "--temp", "0", "-t", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // llama.cpp's text starts " went to the park" (without the space, prompt + output would read
  // "Timwent"); keel prints the first 8 tokens of it and a newline.
  ASSERT_FALSE(r.out.empty());
  EXPECT_EQ(r.out.rfind(" went to the park", 0), 0u) << r.out;
  EXPECT_EQ(ref["gen_text"].get<std::string>().rfind(r.out.substr(0, r.out.size() - 1), 0), 0u)
      << r.out;
}

TEST(KeelCliTest, SameSeedSameText) {
  KEEL_REQUIRE_SHARED();
  std::vector<std::string> args = {"run",
                                   "-m",
                                   shared_path(kStories),
                                   "-p",
                                   "The little dog",
                                   "-n",
                                   "24",
                                   "--seed",
                                   "7",
                                   "--temp",
                                   "1.0",
                                   "-t",
                                   "1"};
  CliResult a = run_keel(args), b = run_keel(args);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  args[9] = "8";
  CliResult c = run_keel(args);
  EXPECT_NE(a.out, c.out);
}

TEST(KeelCliTest, CorruptModelsGiveOneLineErrors) {
  KEEL_REQUIRE_SHARED();
  const std::string src = shared_path(kStories);
  const size_t size = std::filesystem::file_size(src);
  const std::string half = write_copy(src, "half.gguf", size / 2, false);
  const std::string flipped = write_copy(src, "flipped.gguf", size, true);
  expect_one_line_error(run_keel({"run", "-m", half, "-p", "hi", "-n", "4"}), "truncated");
  expect_one_line_error(run_keel({"run", "-m", flipped, "-p", "hi", "-n", "4"}), "bad magic");
  expect_one_line_error(run_keel({"info", half}), "truncated");
  expect_one_line_error(run_keel({"run", "-m", "/nonexistent/model.gguf", "-p", "hi"}),
                        "/nonexistent/model.gguf");
}

TEST(KeelCliTest, PromptLongerThanContextIsAnError) {
  KEEL_REQUIRE_SHARED();
  std::string prompt;
  for (int i = 0; i < 40; ++i) prompt += "Once upon a time ";
  expect_one_line_error(
      run_keel({"run", "-m", shared_path(kStories), "-p", prompt, "-c", "32", "-n", "4"}),
      "context");
}

TEST(KeelCliTest, MakeModelInfoAndRun) {
  const std::string dir = make_temp_dir("cli-make");
  const std::string path = dir + "/tiny-q8.gguf";
  CliResult mk = run_keel({"make-model", "--arch", "qwen2", "--shape", "tiny", "--type", "q8_0",
                           "--seed", "3", "-o", path});
  ASSERT_EQ(mk.exit_code, 0) << mk.err;
  CliResult info = run_keel({"info", path});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.out.find("architecture: qwen2"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("Q8_0"), std::string::npos);
  EXPECT_NE(info.out.find("(random weights)"), std::string::npos);
  EXPECT_NE(info.out.find("kernels in use:"), std::string::npos);
  CliResult run =
      run_keel({"run", "-m", path, "-p", "Once upon a time", "-n", "8", "-t", "1", "--ignore-eos"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_GT(run.out.size(), 1u);
  // Same seed, same bytes.
  const std::string again = dir + "/again.gguf";
  ASSERT_EQ(run_keel({"make-model", "--arch", "qwen2", "--shape", "tiny", "--type", "q8_0",
                      "--seed", "3", "-o", again})
                .exit_code,
            0);
  EXPECT_EQ(read_file(path), read_file(again));
}

// --rope-scaling writes the keys llama.cpp reads; the flags that need another are refused.
TEST(KeelCliTest, MakeModelWritesRopeScaling) {
  const std::string dir = make_temp_dir("cli-make-rope");
  const std::string path = dir + "/yarn.gguf";
  CliResult mk = run_keel({"make-model", "--arch", "qwen3", "--shape", "tiny", "--ctx", "4096",
                           "--rope-scaling", "yarn", "--rope-scale", "4", "--rope-orig-ctx", "1024",
                           "-o", path});
  ASSERT_EQ(mk.exit_code, 0) << mk.err;
  EXPECT_NE(mk.out.find("context 4096, RoPE scaling yarn x4 of 1024"), std::string::npos) << mk.out;
  CliResult info = run_keel({"info", path});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  for (const char* key : {"qwen3.rope.scaling.type", "qwen3.rope.scaling.factor",
                          "qwen3.rope.scaling.original_context_length"}) {
    EXPECT_NE(info.out.find(key), std::string::npos) << key << "\n" << info.out;
  }
  EXPECT_NE(info.out.find("\"yarn\""), std::string::npos) << info.out;
  const std::string bad = dir + "/bad.gguf";
  expect_one_line_error(run_keel({"make-model", "--shape", "tiny", "--rope-scale", "2", "-o", bad}),
                        "need --rope-scaling");
  expect_one_line_error(run_keel({"make-model", "--shape", "tiny", "--rope-scaling", "linear",
                                  "--rope-scale", "2", "--rope-orig-ctx", "64", "-o", bad}),
                        "YaRN");
  expect_one_line_error(
      run_keel({"make-model", "--shape", "tiny", "--rope-scaling", "yarn", "-o", bad}),
      "factor > 0");
  EXPECT_FALSE(std::filesystem::exists(bad));
}

TEST(KeelCliTest, DefaultModelIsStories260K) {
  // No -m: the embedded stories260K, written to KEEL_HOME byte for byte as the repo's file, and
  // its text the same as from that file.
  const std::string home = make_temp_dir("cli-home");
  const std::vector<std::string> args = {"-p", "Once upon a time", "-n", "16", "-t",
                                         "1",  "--temp",           "0"};
  std::vector<std::string> def = {"run"};
  def.insert(def.end(), args.begin(), args.end());
  CliResult r = run_keel(def, {"KEEL_HOME=" + home});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("random weights"), std::string::npos) << r.err;
  EXPECT_EQ(read_file(home + "/stories260K.gguf"), read_file(KEEL_REPO_STORIES));
  std::vector<std::string> explicit_run = {"run", "-m", KEEL_REPO_STORIES};
  explicit_run.insert(explicit_run.end(), args.begin(), args.end());
  CliResult same = run_keel(explicit_run);
  ASSERT_EQ(same.exit_code, 0) << same.err;
  EXPECT_EQ(r.out, same.out);
  EXPECT_GT(r.out.size(), std::string("Once upon a time").size());
}

TEST(KeelCliTest, BuiltinRandomModelIsCreatedAndLabelled) {
  const std::string home = make_temp_dir("cli-home-random");
  CliResult r = run_keel({"run", "-m", "builtin:random", "-p", "Hello", "-n", "8", "-t", "1"},
                         {"KEEL_HOME=" + home});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GT(r.out.size(), 1u);
  EXPECT_NE(r.err.find("random weights"), std::string::npos) << r.err;
  EXPECT_TRUE(std::filesystem::exists(home + "/default-tiny-f32-v2.gguf"));
  expect_one_line_error(run_keel({"run", "-m", "builtin:gpt5", "-p", "hi"}, {"KEEL_HOME=" + home}),
                        "builtin:random");
}

TEST(KeelCliTest, UsageErrorsAreReported) {
  CliResult r = run_keel({"run"});  // no prompt
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("prompt"), std::string::npos) << r.err;
  CliResult isa = run_keel({"run", "-p", "x", "--isa", "sse9"});
  EXPECT_NE(isa.exit_code, 0);
  CliResult kv = run_keel({"run", "-p", "x", "--kv-type", "q4_0"});
  EXPECT_NE(kv.exit_code, 0);
  EXPECT_NE(kv.err.find("--kv-type"), std::string::npos) << kv.err;
}

// The --help line of `option` in `help` ("" when there is none).
std::string help_line(const std::string& help, const std::string& option) {
  const size_t at = help.find("  " + option + " ");
  if (at == std::string::npos) return "";
  return help.substr(at, help.find('\n', at) - at);
}

TEST(KeelCliTest, HelpShowsTheDefaults) {
  const CliResult serve = run_keel({"serve", "--help"});
  ASSERT_EQ(serve.exit_code, 0) << serve.err;
  for (const auto& [option, value] :
       std::vector<std::pair<std::string, std::string>>{{"--port", "=8080"},
                                                        {"--host", "=127.0.0.1"},
                                                        {"--max-body-bytes", "=8388608"},
                                                        {"--io-threads", "=2"},
                                                        {"--max-connections", "=1024"},
                                                        {"--max-connections-per-client", "=256"},
                                                        {"--header-timeout", "=10"},
                                                        {"--batch-concurrency", "=8"},
                                                        {"--max-num-seqs", "=16"}}) {
    EXPECT_NE(help_line(serve.out, option).find(value), std::string::npos)
        << option << ": " << help_line(serve.out, option);
  }
  // Every subcommand: cluster up's gateway flags and its autoscaler's.
  const CliResult up = run_keel({"cluster", "up", "--help"});
  ASSERT_EQ(up.exit_code, 0) << up.err;
  for (const auto& [option, value] :
       std::vector<std::pair<std::string, std::string>>{{"--max-body-bytes", "=8388608"},
                                                        {"--io-threads", "=2"},
                                                        {"--batch-concurrency", "=8"},
                                                        {"--activation-timeout", "=30"}}) {
    EXPECT_NE(help_line(up.out, option).find(value), std::string::npos)
        << option << ": " << help_line(up.out, option);
  }
}

TEST(KeelCliTest, InfoCpuNamesTheTableInUse) {
  // The best table by default; --isa and KEEL_ISA force a lower one (scalar runs everywhere).
  CliResult r = run_keel({"info", "--cpu"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("kernel tables: scalar"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("kernels in use: "), std::string::npos) << r.out;
  r = run_keel({"info", "--cpu", "--isa", "scalar"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("kernels in use: scalar\n"), std::string::npos) << r.out;
  r = run_keel({"info", "--cpu"}, {"KEEL_ISA=scalar"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("kernels in use: scalar\n"), std::string::npos) << r.out;
  expect_one_line_error(run_keel({"info"}), "needs a model file");
}

TEST(KeelCliTest, BenchPrintsLlamaBenchJson) {
  KEEL_REQUIRE_SHARED();
  const CliResult r = run_keel({"bench", "-m", shared_path(kStories), "-p", "16,8", "-n", "4", "-r",
                                "2", "-o", "json", "-t", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_array()) << r.out;
  ASSERT_EQ(j.size(), 3u);
  const std::vector<std::string> names = {"pp16", "pp8", "tg4"};
  for (size_t i = 0; i < 3; ++i) {
    const auto& t = j[i];
    EXPECT_EQ(t["test"], names[i]);
    EXPECT_EQ(t["n_prompt"], i < 2 ? (i == 0 ? 16 : 8) : 0);
    EXPECT_EQ(t["n_gen"], i < 2 ? 0 : 4);
    EXPECT_EQ(t["n_threads"], 1);
    EXPECT_EQ(t["model_type"], "llama 293K F32");
    EXPECT_GT(t["model_size"].get<int64_t>(), 1'000'000);
    ASSERT_EQ(t["samples_ts"].size(), 2u);
    EXPECT_GT(t["avg_ts"].get<double>(), 0.0);
    EXPECT_GE(t["stddev_ts"].get<double>(), 0.0);
    EXPECT_FALSE(t.contains("bound_ts"));  // only with --roofline
  }
}

// --exit-predictors: each tg test plain and "+exit" (SpecEE machinery, nothing exits), and the
// overhead — random predictors in the markdown table, the committed ones in the JSON.
TEST(KeelCliTest, BenchExitPredictorsReportsBothRowsAndTheOverhead) {
  CliResult r = run_keel({"bench", "-m", KEEL_REPO_STORIES, "-p", "0", "-n", "4", "-r", "2", "-t",
                          "1", "--exit-predictors", "random"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("| tg4 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| tg4+exit |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("random weights exit nowhere"), std::string::npos) << r.out;
  const size_t table = r.out.find("| f32 | tg4+exit | ", r.out.find("| kv | test | plain"));
  ASSERT_NE(table, std::string::npos) << r.out;
  // | kv | test | plain t/s | predictors t/s | predictors overhead | with candidates t/s |
  // overhead | of which candidates |
  const std::string row = r.out.substr(table, r.out.find('\n', table) - table);
  std::vector<std::string> cells;
  for (size_t p = 1, q; (q = row.find('|', p)) != std::string::npos; p = q + 1) {
    cells.push_back(row.substr(p + 1, q - p - 2));
  }
  ASSERT_EQ(cells.size(), 8u) << row;
  for (size_t c : {2, 3, 5}) EXPECT_GT(std::stod(cells[c]), 0.0) << row;
  for (size_t c : {4, 6, 7}) {
    EXPECT_TRUE(std::isfinite(std::stod(cells[c]))) << row;
    EXPECT_EQ(cells[c].back(), '%') << row;
  }

  r = run_keel({"bench", "-m", KEEL_REPO_STORIES, "-p", "0", "-n", "4", "-r", "1", "-t", "1", "-o",
                "json", "--exit-predictors",
                std::string(KEEL_REPO_STORIES)
                    .replace(std::string(KEEL_REPO_STORIES).size() - 5, 5, ".exit.gguf")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_array() && j.size() == 2u) << r.out;
  EXPECT_EQ(j[0]["test"], "tg4");
  EXPECT_FALSE(j[0].contains("overhead"));
  EXPECT_EQ(j[1]["test"], "tg4+exit");
  EXPECT_GT(j[1]["avg_ts"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(j[1]["plain_avg_ts"].get<double>(), j[0]["avg_ts"].get<double>());
  EXPECT_TRUE(std::isfinite(j[1]["overhead"].get<double>()));
  EXPECT_GE(j[1]["candidates_share"].get<double>(), 0.0);
  EXPECT_GT(j[1]["predictors_avg_ts"].get<double>(), 0.0);
  EXPECT_TRUE(std::isfinite(j[1]["predictors_overhead"].get<double>()));
  EXPECT_NE(j[1]["exit_predictors"].get<std::string>().find("draft head"), std::string::npos);

  expect_one_line_error(run_keel({"bench", "-m", KEEL_REPO_STORIES, "-p", "0", "-n", "4",
                                  "--exit-predictors", "/nonexistent.exit.gguf"}),
                        "nonexistent.exit.gguf");
}

TEST(KeelCliTest, BenchBadInputIsOneLine) {
  KEEL_REQUIRE_SHARED();
  expect_one_line_error(run_keel({"bench", "-m", shared_path(kStories), "-p", "100000", "-n", "0"}),
                        "does not fit the context");
  expect_one_line_error(run_keel({"bench", "-m", "/nonexistent.gguf"}), "nonexistent.gguf");
  const CliResult r = run_keel({"bench", "-m", shared_path(kStories), "-r", "0"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.err.find("Sanitizer"), std::string::npos) << r.err;
}

TEST(KeelCliTest, EvalPicReportsEveryVariantAgainstFullRecompute) {
  KEEL_REQUIRE_SHARED();
  CliResult r = run_keel({"eval", "pic", "-m", shared_path(kStories), "-t", "1", "--prompts", "2",
                          "--chunks", "3", "--chunk-len", "24", "--continuation", "8", "--variants",
                          "full,naive,legolink-4096,cacheblend-100", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(count_lines(r.out), 4) << r.out;
  std::map<std::string, nlohmann::json> by_variant;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    for (const char* key : {"variant", "k", "top1_agreement", "kl", "recompute_fraction", "ttft_ms",
                            "greedy_match_tokens"}) {
      EXPECT_TRUE(j.contains(key)) << key << " in " << line;
    }
    by_variant[j["variant"]] = j;
  }
  EXPECT_EQ(by_variant["full"]["top1_agreement"], 1.0);
  EXPECT_EQ(by_variant["full"]["recompute_fraction"], 1.0);
  // Recomputing every chunk token (but the leading chunk's, exact anyway) is full recompute.
  for (const char* exact : {"legolink-4096", "cacheblend-100"}) {
    EXPECT_EQ(by_variant[exact]["top1_agreement"], 1.0) << exact;
    EXPECT_LT(by_variant[exact]["kl"].get<double>(), 1e-6) << exact;
    EXPECT_EQ(by_variant[exact]["greedy_match_tokens"], 8.0) << exact;
  }
  EXPECT_LT(by_variant["naive"]["recompute_fraction"].get<double>(), 0.2);
  EXPECT_GT(by_variant["naive"]["kl"].get<double>(), 0.0);
  expect_one_line_error(
      run_keel({"eval", "pic", "-m", shared_path(kStories), "--variants", "legolink-x"}),
      "unknown PIC link variant");
}

// Parses one JSON object per line, keyed by `key`.
std::map<std::string, nlohmann::json> json_lines_by(const std::string& out, const char* key) {
  std::map<std::string, nlohmann::json> by;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    by[j[key].get<std::string>()] = j;
  }
  return by;
}

TEST(KeelCliTest, EvalSparseReportsEveryPolicyAgainstDense) {
  KEEL_REQUIRE_SHARED();
  CliResult r = run_keel({"eval", "sparse", "-m", shared_path(kStories), "-t", "1", "--prompts",
                          "2", "--max-len", "300", "--budget", "64", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(count_lines(r.out), 5) << r.out;
  auto by = json_lines_by(r.out, "policy");
  for (const auto& [policy, j] : by) {
    for (const char* key :
         {"policy", "budget", "top1_agreement", "kl", "max_pages_held", "prefill_pages",
          "generated_tokens", "pages_held_curve", "ms_per_token_by_quarter"}) {
      EXPECT_TRUE(j.contains(key)) << key << " in " << j.dump();
    }
    EXPECT_EQ(j["generated_tokens"], 300 - 32);
    EXPECT_EQ(j["prefill_pages"], 2);
  }
  EXPECT_EQ(by["dense"]["top1_agreement"], 1.0);
  EXPECT_EQ(by["dense"]["kl"], 0.0);
  EXPECT_EQ(by["dense"]["max_pages_held"], (300 - 1) / 16 + 1);  // every page
  EXPECT_EQ(by["quest"]["max_pages_held"], (300 - 1) / 16 + 1);  // keeps every page
  EXPECT_LE(by["raas"]["max_pages_held"], 2 + 64 / 16 + 1);      // prefill + L/16 + 1
  EXPECT_LE(by["streaming"]["max_pages_held"], 64 / 16 + 1);
  for (const char* approx : {"streaming", "h2o", "quest", "raas"}) {
    EXPECT_GT(by[approx]["kl"].get<double>(), 0.0) << approx;
    EXPECT_GT(by[approx]["top1_agreement"].get<double>(), 0.5) << approx;
  }
  // A budget covering the whole context is dense for every policy.
  r = run_keel({"eval", "sparse", "-m", shared_path(kStories), "-t", "1", "--prompts", "1",
                "--max-len", "200", "--budget", "512", "--window", "512", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const auto& [policy, j] : json_lines_by(r.out, "policy")) {
    EXPECT_EQ(j["top1_agreement"], 1.0) << policy;
    EXPECT_EQ(j["kl"], 0.0) << policy;
  }
  expect_one_line_error(run_keel({"eval", "sparse", "-m", shared_path(kStories), "--budget", "8"}),
                        "--budget must be at least --page-size");
  expect_one_line_error(
      run_keel({"eval", "sparse", "-m", shared_path(kStories), "--max-len", "100000"}),
      "--max-len must be in");
}

}  // namespace
}  // namespace keel::testing
