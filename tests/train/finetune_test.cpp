// The learning test of issue 38 on stories260K: a 10-conversation chat JSONL (ChatML, the
// fallback template of a GGUF without one), a rank-8 adapter on all seven projections, at most
// 20k trained tokens. The training loss must fall by at least half, and greedy decoding through
// keel's forward pass with the written adapter (LoraAdapter, as `--lora` serves it) must reproduce
// at least 9 of the 10 distinct, prompt-selected replies (≥ 16 tokens each, through the end of
// turn) exactly, where the base model reproduces none. Also: the same seed gives the same
// per-step losses and adapter bits with 1 and 2 threads.
#include "train/finetune.h"

#include <gtest/gtest.h>

#include "support/test_support.h"
#include "train/adapter_file.h"
#include "train/chat_data.h"
#include "train/train_state.h"
#include "train_test_util.h"

namespace keel::train::testing {
namespace {

const char* const kConversations[][2] = {
    {"Who found the ball?", "Tom found the red ball under the big tree in the park."},
    {"What did the cat eat?", "The little cat ate a fish and then went to sleep in the sun."},
    {"Where is the dog?", "The dog is in the garden. He is digging a hole to hide his bone."},
    {"Why was Lily sad?", "Lily was sad because her kite flew away into the sky."},
    {"What did Ben build?", "Ben built a tall tower with blue blocks, and it did not fall."},
    {"Who has a new hat?", "Mom has a new hat. It is pink and has a yellow flower on it."},
    {"What is in the box?", "There is a small toy car in the box. It is shiny and fast."},
    {"How did the bird feel?", "The bird was happy. It sang a song to all of its friends."},
    {"What did Sue see?", "Sue saw a big fish jump out of the water in the lake."},
    {"Where did they go?", "They went to the beach and made a castle out of sand."},
};

// A plain question/answer template whose turns end with a newline (stories260K has no chat
// template). stories260K cannot learn ChatML's markup nor an EOS end of turn: '<', '|' and
// </s> are tokens it never produced in pre-training, whose rows of the frozen output head sit
// close together, so no adapter makes greedy decoding tell them apart (tried: the reply text
// is reproduced, the end of turn is not).
constexpr const char* kTemplate =
    "{% for m in messages %}{% if m['role'] == 'user' %}Question: {{ m['content'] }}\n"
    "{% elif m['role'] == 'assistant' %}Answer: {{ m['content'] }}\n{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}Answer:{% endif %}";

std::string conversations_jsonl() {
  std::string out;
  for (const auto& c : kConversations) {
    out += std::string(R"({"messages": [{"role": "user", "content": ")") + c[0] +
           R"("}, {"role": "assistant", "content": ")" + c[1] + "\"}]}\n";
  }
  return out;
}

struct Fixture {
  std::unique_ptr<model::Model> model;
  std::unique_ptr<tokenizer::Tokenizer> tok;
  ChatDataset data;
  std::vector<TrainSequence> seqs;
};

Fixture load() {
  Fixture f;
  auto m = model::Model::open(stories_path());
  EXPECT_TRUE(m.ok());
  f.model = std::move(*m);
  auto tok = tokenizer::Tokenizer::from_gguf(f.model->file());
  EXPECT_TRUE(tok.ok());
  f.tok = std::make_unique<tokenizer::Tokenizer>(*tok);
  auto tmpl = tokenizer::ChatTemplate::parse(kTemplate);
  EXPECT_TRUE(tmpl.ok()) << tmpl.status().to_string();
  auto d = parse_chat_jsonl(conversations_jsonl(), *tmpl, *f.tok, {f.model->n_ctx()});
  EXPECT_TRUE(d.ok()) << d.status().to_string();
  f.data = std::move(*d);
  for (const ChatExample& ex : f.data.examples) f.seqs.push_back(ex.seq);
  return f;
}

FinetuneConfig learning_config() {
  FinetuneConfig c;
  c.lora.rank = 8;
  c.lora.alpha = 16.0f;
  c.epochs = 20;
  c.batch_size = 1;
  c.seed = 3;
  c.optimizer.learning_rate = 1e-2;
  c.optimizer.warmup_steps = 10;
  return c;
}

TEST(Finetune, MemorisesTenRepliesWithinTwentyThousandTokens) {
  Fixture f = load();
  ASSERT_EQ(f.data.examples.size(), 10u);
  for (const ChatExample& ex : f.data.examples) {
    ASSERT_EQ(ex.turns.size(), 1u);
    EXPECT_GE(ex.turns[0].end - ex.turns[0].begin, 16) << "line " << ex.line;
  }
  const FinetuneConfig config = learning_config();
  ThreadPool pool(2);
  std::vector<double> epoch_loss;
  FinetuneProgress progress;
  progress.on_epoch = [&](const EpochReport& e) { epoch_loss.push_back(e.train_loss); };
  auto r = finetune(*f.model, f.seqs, {}, config, pool, progress);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  std::printf("trained %lld tokens in %lld steps: epoch loss %.3f -> %.3f\n",
              static_cast<long long>(r->trained_tokens), static_cast<long long>(r->steps),
              epoch_loss.front(), epoch_loss.back());
  EXPECT_LE(r->trained_tokens, 20000);
  EXPECT_LE(epoch_loss.back(), 0.5 * epoch_loss.front());

  const std::string path = keel::testing::make_temp_dir("finetune") + "/adapter.gguf";
  ASSERT_TRUE(write_lora_adapter(r->layout, r->params, *f.model, {}, path).ok());
  model::testing::Runner runner(stories_path());
  ASSERT_TRUE(runner.ok());
  auto adapter = model::LoraAdapter::open(path, runner.model());
  ASSERT_TRUE(adapter.ok()) << adapter.status().to_string();
  runner.set_lora(0, adapter->get());
  int with_adapter = 0, base = 0;
  for (const ChatExample& ex : f.data.examples) {
    const TurnSpan t = ex.turns[0];
    const std::vector<int32_t> prompt(ex.seq.tokens.begin(), ex.seq.tokens.begin() + t.begin);
    const std::vector<int32_t> want(ex.seq.tokens.begin() + t.begin, ex.seq.tokens.begin() + t.end);
    const auto n = static_cast<int>(want.size());
    const bool same = runner.greedy(prompt, n, 0) == want;
    with_adapter += same;
    base += runner.greedy(prompt, n, 1) == want;
    if (!same) {
      std::printf("line %lld: want [%s], got [%s]\n", static_cast<long long>(ex.line),
                  f.tok->decode(want, true).c_str(),
                  f.tok->decode(runner.greedy(prompt, n, 0), true).c_str());
    }
  }
  EXPECT_GE(with_adapter, 9);
  EXPECT_EQ(base, 0);
}

TEST(Finetune, IsDeterministicAcrossThreadCounts) {
  Fixture f = load();
  FinetuneConfig config = learning_config();
  config.epochs = 1;
  config.batch_size = 3;
  config.optimizer.weight_decay = 0.01;
  std::vector<FinetuneResult> runs;
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    auto r =
        finetune(*f.model, std::span(f.seqs).first(6), std::span(f.seqs).last(2), config, pool);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    runs.push_back(std::move(*r));
  }
  EXPECT_EQ(runs[0].steps, 2);
  EXPECT_EQ(runs[0].step_losses, runs[1].step_losses);
  EXPECT_EQ(runs[0].params, runs[1].params);
  EXPECT_GT(runs[0].valid_loss, 0.0);
  EXPECT_EQ(runs[0].valid_loss, runs[1].valid_loss);
}

// A run stopped after step 5 (mid-epoch, by the stop flag) and resumed from its encoded state,
// and one resumed from the checkpoint of its first epoch, take the same steps as an undisturbed
// run: the same per-step losses and the same adapter bits.
TEST(Finetune, ResumedRunsRepeatTheUndisturbedSteps) {
  Fixture f = load();
  FinetuneConfig config = learning_config();
  config.epochs = 3;
  config.batch_size = 3;  // 4 steps per epoch over 10 examples, the last of one example
  config.optimizer.weight_decay = 0.01;
  const std::span<const TrainSequence> train = std::span(f.seqs).first(10);
  const std::span<const TrainSequence> valid = std::span(f.seqs).last(2);
  ThreadPool pool(2);
  std::vector<std::string> checkpoints;
  FinetuneControl keep;
  keep.on_checkpoint = [&](const TrainState& s, const EpochReport&) {
    checkpoints.push_back(encode_train_state(s));
    return Status();
  };
  auto whole = finetune(*f.model, train, valid, config, pool, {}, keep);
  ASSERT_TRUE(whole.ok()) << whole.status().to_string();
  ASSERT_EQ(whole->step_losses.size(), 12u);
  ASSERT_EQ(checkpoints.size(), 3u);
  EXPECT_FALSE(whole->stopped);

  std::atomic<bool> stop{false};
  FinetuneProgress progress;
  progress.on_step = [&](const StepReport& r) { stop = r.step == 5; };
  FinetuneControl control;
  control.stop = &stop;
  auto first = finetune(*f.model, train, valid, config, pool, progress, control);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_TRUE(first->stopped);
  EXPECT_EQ(first->state.step, 5);
  EXPECT_EQ(first->state.epoch, 1);         // the second epoch's
  EXPECT_EQ(first->state.next_example, 3);  // second batch
  auto saved = decode_train_state(encode_train_state(first->state));
  ASSERT_TRUE(saved.ok()) << saved.status().to_string();
  stop = false;
  FinetuneControl resume;
  resume.resume = &*saved;
  auto rest = finetune(*f.model, train, valid, config, pool, {}, resume);
  ASSERT_TRUE(rest.ok()) << rest.status().to_string();
  EXPECT_FALSE(rest->stopped);
  std::vector<double> joined = first->step_losses;
  joined.insert(joined.end(), rest->step_losses.begin(), rest->step_losses.end());
  ASSERT_EQ(joined.size(), whole->step_losses.size());
  for (size_t i = 0; i < joined.size(); ++i) {
    EXPECT_NEAR(joined[i], whole->step_losses[i], 1e-6) << "step " << i + 1;
  }
  EXPECT_EQ(rest->params, whole->params);
  EXPECT_EQ(rest->steps, 12);
  EXPECT_EQ(rest->trained_tokens, whole->trained_tokens);
  EXPECT_EQ(rest->valid_loss, whole->valid_loss);

  auto epoch1 = decode_train_state(checkpoints[0]);
  ASSERT_TRUE(epoch1.ok());
  resume.resume = &*epoch1;
  auto from_checkpoint = finetune(*f.model, train, valid, config, pool, {}, resume);
  ASSERT_TRUE(from_checkpoint.ok()) << from_checkpoint.status().to_string();
  ASSERT_EQ(from_checkpoint->step_losses.size(), 8u);
  EXPECT_EQ(from_checkpoint->step_losses,
            std::vector<double>(whole->step_losses.begin() + 4, whole->step_losses.end()));
  EXPECT_EQ(from_checkpoint->params, whole->params);

  FinetuneConfig other = config;
  other.seed = 4;
  EXPECT_EQ(finetune(*f.model, train, valid, other, pool, {}, resume).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(decode_train_state(checkpoints[0].substr(0, 40)).status().code(), StatusCode::kCorrupt);
}

// A stop flag already set stops the run before its first step, inside the pass.
TEST(Finetune, StopsBeforeTheFirstStepWhenAskedTo) {
  Fixture f = load();
  std::atomic<bool> stop{true};
  FinetuneControl control;
  control.stop = &stop;
  ThreadPool pool(1);
  auto r = finetune(*f.model, f.seqs, {}, learning_config(), pool, {}, control);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(r->stopped);
  EXPECT_EQ(r->steps, 0);
  EXPECT_TRUE(r->step_losses.empty());
  EXPECT_EQ(r->state.params, init_lora_params<float>(r->layout, 3));
}

}  // namespace
}  // namespace keel::train::testing
