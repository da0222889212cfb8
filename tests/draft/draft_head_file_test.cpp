// The draft head file: a round trip keeps every value; the target digest is the same whatever the
// weight layout and differs for another model of the same shape; corrupt files (not GGUF, cut
// short, another architecture or version, a tensor of the wrong shape) and heads for another
// model are InvalidArgument errors naming the file, never a crash.
#include "draft/draft_head_file.h"

#include <gtest/gtest.h>

#include <fstream>

#include "core/thread_pool.h"
#include "draft/draft_trainer.h"
#include "draft/target_digest.h"
#include "draft_test_util.h"
#include "gguf/writer.h"
#include "model/random_model.h"
#include "support/test_support.h"

namespace keel::draft {
namespace {

DraftHeadFile small_file(const model::Model& m) {
  DraftTrainConfig c;
  c.hidden = 8;
  c.seed = 3;
  DraftHeadFile f;
  f.weights = init_draft_head(m, c);
  f.n_vocab = m.hparams().n_vocab;
  f.target_digest = target_digest(m);
  f.target_name = "stories260K.gguf";
  f.train = {100, 2, 3, 1.5, 0.25};
  f.command = "keel train-draft -m stories260K.gguf";
  return f;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

void expect_invalid(const Result<std::unique_ptr<DraftHead>>& r, const std::string& path,
                    const std::string& what) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument) << r.error().to_string();
  EXPECT_NE(r.error().message().find(path), std::string::npos) << r.error().message();
  EXPECT_NE(r.error().message().find(what), std::string::npos) << r.error().message();
}

TEST(DraftHeadFileTest, RoundTripKeepsEveryValue) {
  auto m = load_repo_stories();
  ASSERT_NE(m, nullptr);
  const DraftHeadFile f = small_file(*m);
  const std::string path = testing::make_temp_dir("draft_file") + "/head.draft.gguf";
  ASSERT_TRUE(save_draft_head(f, path).ok());
  auto back = read_draft_head(path);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back->weights.w_in, f.weights.w_in);
  EXPECT_EQ(back->weights.w_up, f.weights.w_up);
  EXPECT_EQ(back->weights.w_down, f.weights.w_down);
  EXPECT_EQ(back->weights.b_down, f.weights.b_down);
  EXPECT_EQ(back->weights.norm, f.weights.norm);
  EXPECT_EQ(back->weights.hidden, 8);
  EXPECT_FLOAT_EQ(back->weights.rms_eps, f.weights.rms_eps);
  EXPECT_EQ(back->target_digest, f.target_digest);
  EXPECT_EQ(back->target_name, f.target_name);
  EXPECT_EQ(back->train.tokens, 100);
  EXPECT_EQ(back->train.seed, 3u);
  EXPECT_DOUBLE_EQ(back->train.accuracy, 0.25);
  EXPECT_EQ(back->command, f.command);
  EXPECT_TRUE(load_draft_head(path, *m).ok());
  EXPECT_EQ(default_draft_head_path("/m/stories260K.gguf"), "/m/stories260K.draft.gguf");
  EXPECT_EQ(default_draft_head_path("model.bin"), "model.bin.draft.gguf");
}

TEST(DraftHeadFileTest, DigestIgnoresTheLayoutAndTellsModelsApart) {
  auto m = load_repo_stories();
  ASSERT_NE(m, nullptr);
  model::ModelOptions rows;
  rows.group_weights = false;
  auto mapped = model::Model::open(KEEL_REPO_STORIES, rows, gguf::DataMode::kMmap);
  ASSERT_TRUE(mapped.ok());
  EXPECT_EQ(target_digest(*m), target_digest(**mapped));
  // The same shape with other (random) weights.
  model::RandomModelSpec spec;
  spec.shape = model::ModelShape{"stories-shaped",
                                 m->hparams().n_embd,
                                 m->hparams().n_layer,
                                 m->hparams().n_head,
                                 m->hparams().n_head_kv,
                                 m->hparams().n_ff,
                                 m->hparams().n_vocab,
                                 512,
                                 10000.0f,
                                 m->hparams().rms_eps,
                                 true,
                                 false};
  spec.vocab_from = KEEL_REPO_STORIES;
  const std::string dir = testing::make_temp_dir("draft_digest");
  ThreadPool pool(1);
  ASSERT_TRUE(model::write_random_model(spec, dir + "/other.gguf", pool).ok());
  auto other = model::Model::open(dir + "/other.gguf");
  ASSERT_TRUE(other.ok()) << other.error().to_string();
  ASSERT_EQ((*other)->hparams().n_embd, m->hparams().n_embd);
  EXPECT_NE(target_digest(*m), target_digest(**other));
  // A head for stories260K on that model: refused, naming both digests.
  expect_invalid(load_draft_head(KEEL_REPO_DRAFT_HEAD, **other), KEEL_REPO_DRAFT_HEAD,
                 "trained for another model");
  // A head of another width.
  spec.shape.n_embd = 32;
  spec.shape.n_ff = 64;
  spec.shape.n_head = 4;
  spec.shape.n_head_kv = 4;
  ASSERT_TRUE(model::write_random_model(spec, dir + "/narrow.gguf", pool).ok());
  auto narrow = model::Model::open(dir + "/narrow.gguf");
  ASSERT_TRUE(narrow.ok()) << narrow.error().to_string();
  expect_invalid(load_draft_head(KEEL_REPO_DRAFT_HEAD, **narrow), KEEL_REPO_DRAFT_HEAD,
                 "n_embd 64");
}

TEST(DraftHeadFileTest, CorruptFilesAreClearErrors) {
  auto m = load_repo_stories();
  ASSERT_NE(m, nullptr);
  const std::string dir = testing::make_temp_dir("draft_corrupt");
  const std::string head = testing::read_file(KEEL_REPO_DRAFT_HEAD);
  ASSERT_GT(head.size(), 1000u);

  write_bytes(dir + "/noise.gguf", "this is not a GGUF file at all, just text");
  expect_invalid(load_draft_head(dir + "/noise.gguf", *m), dir + "/noise.gguf", "");
  for (size_t cut : {size_t{8}, size_t{200}, head.size() / 2, head.size() - 4}) {
    const std::string path = dir + "/cut" + std::to_string(cut) + ".gguf";
    write_bytes(path, head.substr(0, cut));
    expect_invalid(load_draft_head(path, *m), path, "");
  }
  // A valid GGUF that is something else: the model itself.
  expect_invalid(load_draft_head(KEEL_REPO_STORIES, *m), KEEL_REPO_STORIES,
                 "not a keel draft head");
  // Another version, and a tensor of the wrong shape.
  DraftHeadFile f = small_file(*m);
  gguf::GgufWriter w;
  w.set("general.architecture", "keel-draft-head");
  w.set("keel.draft.version", int64_t{99});
  ASSERT_TRUE(w.write(dir + "/v99.gguf").ok());
  expect_invalid(load_draft_head(dir + "/v99.gguf", *m), dir + "/v99.gguf",
                 "unsupported version 99");
  ASSERT_TRUE(save_draft_head(f, dir + "/good.gguf").ok());
  std::string bytes = testing::read_file(dir + "/good.gguf");
  const std::string key = "keel.draft.hidden";
  const size_t at = bytes.find(key);
  ASSERT_NE(at, std::string::npos);
  bytes[at + key.size() + 4] = 9;  // hidden 8 → 9: the tensors no longer fit
  write_bytes(dir + "/shape.gguf", bytes);
  expect_invalid(load_draft_head(dir + "/shape.gguf", *m), dir + "/shape.gguf", "tensor");
  const auto missing = load_draft_head(dir + "/absent.gguf", *m);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace keel::draft
