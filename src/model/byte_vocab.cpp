// add_byte_vocab: builds the token list, scores and types of the generated SPM vocabulary.
#include "model/byte_vocab.h"

#include <cstdio>
#include <set>
#include <string>
#include <vector>

namespace keel::model {
namespace {

// Token types as GGUF stores them (llama.cpp's numbering).
constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kUnused = 5, kByte = 6;

constexpr const char* kWords[] = {
    "the",   "and",      "was",     "she",    "he",     "they",   "it",      "a",       "to",
    "of",    "in",       "on",      "with",   "for",    "is",     "that",    "her",     "his",
    "said",  "you",      "were",    "had",    "day",    "one",    "little",  "big",     "time",
    "upon",  "once",     "there",   "happy",  "play",   "played", "saw",     "went",    "girl",
    "boy",   "dog",      "cat",     "tree",   "park",   "ball",   "friend",  "friends", "mom",
    "dad",   "home",     "house",   "sun",    "sky",    "very",   "liked",   "loved",   "wanted",
    "named", "from",     "but",     "so",     "all",    "not",    "at",      "up",      "down",
    "out",   "into",     "what",    "when",   "then",   "we",     "can",     "will",    "would",
    "could", "like",     "look",    "see",    "go",     "come",   "good",    "new",     "old",
    "red",   "blue",     "green",   "bird",   "fish",   "water",  "food",    "toy",     "box",
    "car",   "book",     "story",   "garden", "flower", "sad",    "smile",   "laugh",   "run",
    "jump",  "fast",     "slow",    "small",  "long",   "nice",   "kind",    "help",    "found",
    "made",  "make",     "thought", "asked",  "came",   "took",   "gave",    "know",    "think",
    "about", "after",    "before",  "again",  "away",   "back",   "here",    "how",     "just",
    "more",  "now",      "only",    "other",  "over",   "some",   "them",    "this",    "too",
    "two",   "under",    "us",      "way",    "who",    "why",    "yes",     "no",      "because",
    "every", "together", "learned", "lesson", "world",  "night",  "morning", "moon",    "star",
    "rain",
};

}  // namespace

ByteVocabInfo add_byte_vocab(gguf::GgufWriter& w, int64_t min_size) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<float> scores = {0.0f, 0.0f, 0.0f};
  std::vector<int32_t> types = {kUnknown, kControl, kControl};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    tokens.emplace_back(buf);
    scores.push_back(0.0f);
    types.push_back(kByte);
  }
  const int64_t words_begin = static_cast<int64_t>(tokens.size());
  std::set<std::string> seen(tokens.begin(), tokens.end());
  auto add = [&](const std::string& piece) {
    if (!seen.insert(piece).second) return;
    scores.push_back(-static_cast<float>(tokens.size()));
    tokens.push_back(piece);
    types.push_back(kNormal);
  };
  const std::string space = "\xe2\x96\x81";  // U+2581, SentencePiece's space marker
  add(space);
  for (char c = ' ' + 1; c < 127; ++c) add(std::string(1, c));
  for (const char* word : kWords) {
    const std::string piece = space + word;
    for (size_t len = space.size() + 1; len <= piece.size(); ++len) add(piece.substr(0, len));
  }
  const int64_t words_end = static_cast<int64_t>(tokens.size());
  for (int64_t i = 0; static_cast<int64_t>(tokens.size()) < min_size; ++i) {
    tokens.push_back("<unused_" + std::to_string(i) + ">");
    scores.push_back(-1e9f);
    types.push_back(kUnused);
  }
  w.set("tokenizer.ggml.model", "llama");
  w.set("tokenizer.ggml.tokens", gguf::make_array(gguf::ValueType::kString, tokens));
  w.set("tokenizer.ggml.scores", gguf::make_array(gguf::ValueType::kFloat32, scores));
  w.set("tokenizer.ggml.token_type", gguf::make_array(gguf::ValueType::kInt32, types));
  w.set("tokenizer.ggml.bos_token_id", uint32_t{1});
  w.set("tokenizer.ggml.eos_token_id", uint32_t{2});
  w.set("tokenizer.ggml.unknown_token_id", uint32_t{0});
  w.set("tokenizer.ggml.add_bos_token", true);
  w.set("tokenizer.ggml.add_eos_token", false);
  return {static_cast<int64_t>(tokens.size()), words_begin, words_end};
}

}  // namespace keel::model
