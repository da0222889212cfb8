// Detokenization: UTF-8 repair, llama.cpp's clean_spaces (batch and streaming), and the
// incremental decoder's invariants: it never emits part of a code point, and what it streams
// for a token sequence concatenates to exactly the one-shot decode of that sequence.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "gguf/reader.h"
#include "support/test_support.h"
#include "tokenizer/incremental_decoder.h"
#include "tokenizer/space_cleaner.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace keel::tokenizer {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8SanitizerTest, ValidTextIsUnchanged) {
  const std::string text = "plain, é, 日本, 🦙, \x7F";
  EXPECT_EQ(sanitize_utf8(text), text);
  EXPECT_TRUE(is_valid_utf8(text));
}

TEST(Utf8SanitizerTest, EachMaximalIllFormedSubpartBecomesOneReplacement) {
  EXPECT_EQ(sanitize_utf8("\xE2\x82"
                          "A"),
            kFffd + "A");                                           // truncated 3-byte
  EXPECT_EQ(sanitize_utf8("\xF0\x80\x80"), kFffd + kFffd + kFffd);  // F0 needs 90..BF next
  EXPECT_EQ(sanitize_utf8("\xC0\xAF"), kFffd + kFffd);              // overlong lead
  EXPECT_EQ(sanitize_utf8("\xED\xA0\x80"), kFffd + kFffd + kFffd);  // surrogate
  EXPECT_EQ(sanitize_utf8("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);  // > U+10FFFF
  EXPECT_EQ(sanitize_utf8("a\xFF"
                          "b"),
            "a" + kFffd + "b");
  EXPECT_EQ(sanitize_utf8("\xF0\x9F\xA6"), kFffd);  // unfinished at the end: one U+FFFD
  EXPECT_EQ(sanitize_utf8("\xC3\xC3\xA9"), kFffd + "\xC3\xA9");
  EXPECT_FALSE(is_valid_utf8("\xC3"));
}

TEST(Utf8SanitizerTest, OutputDoesNotDependOnChunking) {
  std::mt19937 rng(7);
  const std::string alphabet[] = {"a",    "\xC3", "\xA9", "\xE6", "\x97", "\xA5", "\xF0",
                                  "\x9F", "\xA6", "\x99", "\xFF", "\x80", "\xED", "\xA0"};
  for (int iter = 0; iter < 2000; ++iter) {
    std::string bytes;
    const int n = static_cast<int>(rng() % 24);
    for (int i = 0; i < n; ++i) bytes += alphabet[rng() % std::size(alphabet)];
    Utf8Sanitizer s;
    std::string streamed;
    for (size_t pos = 0; pos < bytes.size();) {
      const size_t len = std::min<size_t>(1 + rng() % 4, bytes.size() - pos);
      std::string chunk;
      s.push(std::string_view(bytes).substr(pos, len), &chunk);
      EXPECT_TRUE(is_valid_utf8(chunk));
      streamed += chunk;
      pos += len;
    }
    s.finish(&streamed);
    ASSERT_EQ(streamed, sanitize_utf8(bytes)) << "iteration " << iter;
    EXPECT_TRUE(is_valid_utf8(streamed));
  }
}

TEST(CleanSpacesTest, MatchesLlamaCppRules) {
  EXPECT_EQ(clean_spaces_batch("Hello , world !"), "Hello, world!");
  EXPECT_EQ(clean_spaces_batch(" ,x ?y .z"), ",x?y.z");
  EXPECT_EQ(clean_spaces_batch("a ' b"), "a'b");
  EXPECT_EQ(clean_spaces_batch("x ' ' y"), "x'' y");  // the consumed space cannot match again
  EXPECT_EQ(clean_spaces_batch("say ' hi ."), "say'hi.");
  EXPECT_EQ(clean_spaces_batch("it 's he 'll they 're we 've I 'm don 't he 'd"),
            "it's he 'll they're we've I'm don 't he 'd");
  EXPECT_EQ(clean_spaces_batch("a '"), "a '");
  EXPECT_EQ(clean_spaces_batch("a 'r"), "a 'r");
  EXPECT_EQ(clean_spaces_batch("a 're"), "a're");
  EXPECT_EQ(clean_spaces_batch("a 's"), "a's");
  EXPECT_EQ(clean_spaces_batch(""), "");
  EXPECT_EQ(clean_spaces_batch("  "), "  ");
}

TEST(CleanSpacesTest, StreamingEqualsBatchForAnyChunking) {
  std::mt19937 rng(11);
  const char alphabet[] = {' ', ' ', '\'', '\'', 's', 'm', 'r', 'v', 'e',
                           't', 'd', 'l',  'x',  ',', '.', '?', '!', '\n'};
  for (int iter = 0; iter < 20000; ++iter) {
    std::string text;
    const int n = static_cast<int>(rng() % 16);
    for (int i = 0; i < n; ++i) text += alphabet[rng() % sizeof(alphabet)];
    StreamingSpaceCleaner cleaner;
    std::string streamed;
    for (size_t pos = 0; pos < text.size();) {
      const size_t len = std::min<size_t>(1 + rng() % 3, text.size() - pos);
      cleaner.push(std::string_view(text).substr(pos, len), &streamed);
      pos += len;
    }
    cleaner.finish(&streamed);
    ASSERT_EQ(streamed, clean_spaces_batch(text)) << "input '" << text << "'";
  }
}

Result<Tokenizer> load_shared(const std::string& name) {
  KEEL_ASSIGN_OR_RETURN(
      gguf::GgufFile f,
      gguf::GgufFile::open(keel::testing::shared_path("vocab/ggml-vocab-" + name + ".gguf"),
                           {.mode = gguf::DataMode::kNone}));
  return Tokenizer::from_gguf(f);
}

// Streams `ids` through an IncrementalDecoder, checking each chunk; returns the concatenation.
std::string stream(IncrementalDecoder* dec, const std::vector<TokenId>& ids) {
  std::string all;
  for (TokenId id : ids) {
    const std::string chunk = dec->push(id);
    EXPECT_TRUE(is_valid_utf8(chunk)) << "chunk after id " << id;
    all += chunk;
  }
  const std::string rest = dec->finish();
  EXPECT_TRUE(is_valid_utf8(rest));
  return all + rest;
}

// Ids that split characters (byte-level / byte-fallback tokens), special tokens, and pieces with
// spaces and quotes (which exercise clean_spaces).
std::vector<TokenId> interesting_ids(const Tokenizer& tok) {
  std::vector<TokenId> ids;
  for (TokenId id = 0; id < tok.vocab_size(); ++id) {
    const std::string piece = tok.token_to_piece(id, true);
    if (piece.size() == 1 || tok.is_control(id) || piece == " '" || piece == "'" || piece == " " ||
        piece == "s" || piece == " ," || piece == "re") {
      ids.push_back(id);
    }
  }
  return ids;
}

// Random ids, half of them drawn from `interesting`.
std::vector<TokenId> random_ids(const Tokenizer& tok, const std::vector<TokenId>& interesting,
                                std::mt19937* rng, size_t n) {
  std::vector<TokenId> ids;
  for (size_t i = 0; i < n; ++i) {
    if ((*rng)() % 2 == 0 && !interesting.empty()) {
      ids.push_back(interesting[(*rng)() % interesting.size()]);
    } else {
      ids.push_back(static_cast<TokenId>((*rng)() % static_cast<uint32_t>(tok.vocab_size())));
    }
  }
  return ids;
}

class IncrementalDecoderVocabTest : public ::testing::TestWithParam<std::string> {};

TEST_P(IncrementalDecoderVocabTest, StreamEqualsOneShotDecodeOnRandomSequences) {
  KEEL_REQUIRE_SHARED();
  auto tok = load_shared(GetParam());
  ASSERT_TRUE(tok.ok()) << tok.error().to_string();
  std::mt19937 rng(1234);
  const std::vector<TokenId> interesting = interesting_ids(*tok);
  for (bool render_special : {false, true}) {
    IncrementalDecoder dec(*tok, render_special);  // reused: finish() resets it
    for (int iter = 0; iter < 300; ++iter) {
      const auto ids = random_ids(*tok, interesting, &rng, 1 + rng() % 40);
      const std::string one_shot = tok->decode(ids, render_special);
      EXPECT_TRUE(is_valid_utf8(one_shot));
      ASSERT_EQ(stream(&dec, ids), one_shot) << GetParam() << " iteration " << iter;
    }
  }
}

TEST_P(IncrementalDecoderVocabTest, StreamReproducesEncodedText) {
  KEEL_REQUIRE_SHARED();
  auto tok = load_shared(GetParam());
  ASSERT_TRUE(tok.ok()) << tok.error().to_string();
  const std::string text =
      "Grüße aus Köln 🦙🚀 — 日本語のテキスト\n\tcode(x) == 42;";
  IncrementalDecoder dec(*tok, false);
  EXPECT_EQ(stream(&dec, tok->encode(text, false, false)), text);
}

INSTANTIATE_TEST_SUITE_P(SharedVocabs, IncrementalDecoderVocabTest,
                         ::testing::Values("llama-spm", "phi-3", "gpt-2", "deepseek-llm", "mpt",
                                           "falcon"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) c = (c == '-') ? '_' : c;
                           return n;
                         });

TEST(IncrementalDecoderTest, ContinuationMatchesLlamaCppGreedyTexts) {
  // llama.cpp's generated texts keep the first piece's SentencePiece space (" went", " was",
  // " Once"): generated ids continue the prompt. Only kSequenceStart (a text's first piece, as
  // /detokenize and decode() see it) drops it.
  KEEL_REQUIRE_SHARED();
  auto file =
      gguf::GgufFile::open(keel::testing::shared_path("models/stories260K/stories260K.gguf"),
                           {.mode = gguf::DataMode::kNone});
  ASSERT_TRUE(file.ok());
  auto tok = Tokenizer::from_gguf(*file);
  ASSERT_TRUE(tok.ok());
  const auto ref = nlohmann::json::parse(keel::testing::read_file(
      keel::testing::shared_path("models/stories260K/reference/greedy.json")));
  IncrementalDecoder continuation(*tok, false, DecodePosition::kContinuation);
  IncrementalDecoder start(*tok, false, DecodePosition::kSequenceStart);
  for (const auto& r : ref["results"]) {
    const auto ids = r["gen_ids"].get<std::vector<TokenId>>();
    const std::string want = r["gen_text"];
    EXPECT_EQ(stream(&continuation, ids), want) << r["prompt"];
    const std::string first = stream(&start, ids);
    EXPECT_EQ(first, tok->decode(ids, false));
    EXPECT_EQ(first, want[0] == ' ' ? want.substr(1) : want) << r["prompt"];
  }
}

TEST(IncrementalDecoderTest, HoldsByteFallbackCharactersUntilComplete) {
  KEEL_REQUIRE_SHARED();
  auto tok = load_shared("llama-spm");
  ASSERT_TRUE(tok.ok()) << tok.error().to_string();
  const TokenId c3 = tok->find_token("<0xC3>");
  const TokenId a9 = tok->find_token("<0xA9>");
  const TokenId f0 = tok->find_token("<0xF0>");
  const TokenId hello = tok->find_token("\xE2\x96\x81Hello");  // "▁Hello"
  ASSERT_NE(c3, kNoToken);
  ASSERT_NE(hello, kNoToken);
  IncrementalDecoder dec(*tok, false);
  EXPECT_EQ(dec.push(hello), "Hello");  // first token: the SPM space prefix is dropped
  EXPECT_EQ(dec.push(c3), "");
  EXPECT_EQ(dec.push(a9), "é");
  EXPECT_EQ(dec.push(f0), "");
  EXPECT_EQ(dec.push(hello), kFffd + " Hello");  // an unfinished character is ill-formed
  EXPECT_EQ(dec.push(c3), "");
  EXPECT_EQ(dec.finish(), kFffd);  // still unfinished at the end
  const std::vector<TokenId> ids = {hello, c3, a9, f0, hello, c3};
  EXPECT_EQ(tok->decode(ids, false), "Helloé" + kFffd + " Hello" + kFffd);
  // After finish() a new sequence starts: its first space is dropped again.
  EXPECT_EQ(dec.push(hello), "Hello");
}

TEST(IncrementalDecoderTest, HoldsSpacesThatCleanSpacesMayRemove) {
  KEEL_REQUIRE_SHARED();
  auto tok = load_shared("gpt-2");
  ASSERT_TRUE(tok.ok()) << tok.error().to_string();
  ASSERT_TRUE(tok->clean_spaces());
  const auto ids = tok->encode("Hello , world 's end", false, false);
  IncrementalDecoder dec(*tok, false);
  std::string streamed;
  std::vector<std::string> chunks;
  for (TokenId id : ids) chunks.push_back(dec.push(id));
  for (const auto& c : chunks) streamed += c;
  streamed += dec.finish();
  EXPECT_EQ(streamed, "Hello, world's end");
  EXPECT_EQ(tok->decode(ids, false), "Hello, world's end");
}

TEST(TokenizerThreadingTest, ConcurrentEncodeAndDecodeAgree) {
  KEEL_REQUIRE_SHARED();
  auto tok = load_shared("gpt-2");
  ASSERT_TRUE(tok.ok()) << tok.error().to_string();
  const std::string text = "Threads share one tokenizer: ünïcödé, 12345, <|endoftext|> done.";
  const auto expected = tok->encode(text, false, true);
  const std::string expected_text = tok->decode(expected, true);
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const Tokenizer copy = *tok;  // copies share the vocabulary
      for (int i = 0; i < 50; ++i) {
        const auto ids = copy.encode(text, false, true);
        ok[t] += ids == expected && copy.decode(ids, true) == expected_text;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(ok[t], 50) << "thread " << t;
}

}  // namespace
}  // namespace keel::tokenizer
