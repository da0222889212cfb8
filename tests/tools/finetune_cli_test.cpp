// `keel finetune` end to end: a short run on stories260K writes an adapter in llama.cpp's LoRA
// GGUF format with the progress and epoch lines, and a malformed data line fails the command
// with the file and line named.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "cli_runner.h"
#include "gguf/reader.h"
#include "support/test_support.h"

namespace keel::testing {
namespace {

constexpr const char* kLine =
    R"({"messages": [{"role": "user", "content": "Who found the ball?"}, )"
    R"({"role": "assistant", "content": "Tom found the red ball."}]})";

std::string write(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(FinetuneCli, WritesAnAdapterWithProgressLines) {
  const std::string dir = make_temp_dir("finetune-cli");
  const std::string train = write(dir, "train.jsonl", std::string(kLine) + "\n" + kLine + "\n");
  const std::string tmpl = write(dir, "qa.jinja",
                                 "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n"
                                 "{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}");
  const std::string out = dir + "/adapter.gguf";
  const CliResult r = run_keel({"finetune", "-m", KEEL_REPO_STORIES, "--train", train,
                                "--validation", train, "--chat-template-file", tmpl, "--rank", "2",
                                "--epochs", "2", "--batch-size", "1", "-t", "1", "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("data: 2 conversations"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("epoch 2: train loss"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("validation loss"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("wrote " + out + ": rank 2 LoRA"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("step 4/4 · epoch 2/2 · loss "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" tok/s · ETA "), std::string::npos) << r.err;
  auto f = gguf::GgufFile::open(out);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(*f->get_string("general.type"), "adapter");
  EXPECT_EQ(*f->get_string("adapter.type"), "lora");
  EXPECT_EQ(f->tensors().size(), 5u * 7u * 2u);  // A and B of 7 projections in 5 layers
}

TEST(FinetuneCli, NamesTheBadLine) {
  const std::string dir = make_temp_dir("finetune-cli-bad");
  const std::string train = write(
      dir, "train.jsonl",
      std::string(kLine) + "\n" +
          R"({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b", "weight": 3}]})" +
          "\n");
  const CliResult r = run_keel(
      {"finetune", "-m", KEEL_REPO_STORIES, "--train", train, "-o", dir + "/adapter.gguf"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(train + ": line 2: messages[1].weight must be 0 or 1"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace keel::testing
