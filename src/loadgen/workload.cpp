// Workload generation: random and shared-prefix prompts from one seeded Rng. The draw order is
// fixed (group prefixes first, then per prompt: lengths, then contents) so that a seed always
// gives the same requests.
#include "loadgen/workload.h"

#include <array>
#include <cmath>
#include <string>

#include "loadgen/rng.h"

namespace keel::loadgen {
namespace {

constexpr int64_t kMaxLen = int64_t{1} << 24;      // per prompt / per output, tokens or words
constexpr int64_t kMaxPrompts = int64_t{1} << 24;  // requests in one run

// Common short English words; most are a single token in SentencePiece and BPE vocabularies.
constexpr std::array<std::string_view, 160> kWords = {
    "the",    "of",     "and",     "to",    "in",    "is",    "it",     "that",   "was",   "for",
    "on",     "are",    "with",    "as",    "his",   "they",  "be",     "at",     "one",   "have",
    "this",   "from",   "or",      "had",   "by",    "word",  "but",    "what",   "some",  "we",
    "can",    "out",    "other",   "were",  "all",   "there", "when",   "up",     "use",   "your",
    "how",    "said",   "an",      "each",  "she",   "which", "do",     "their",  "time",  "if",
    "will",   "way",    "about",   "many",  "then",  "them",  "write",  "would",  "like",  "so",
    "these",  "her",    "long",    "make",  "thing", "see",   "him",    "two",    "has",   "look",
    "more",   "day",    "could",   "go",    "come",  "did",   "number", "sound",  "no",    "most",
    "people", "my",     "over",    "know",  "water", "than",  "call",   "first",  "who",   "may",
    "down",   "side",   "been",    "now",   "find",  "any",   "new",    "work",   "part",  "take",
    "get",    "place",  "made",    "live",  "where", "after", "back",   "little", "only",  "round",
    "man",    "year",   "came",    "show",  "every", "good",  "me",     "give",   "our",   "under",
    "name",   "very",   "through", "just",  "form",  "great", "think",  "say",    "help",  "low",
    "line",   "before", "turn",    "cause", "same",  "mean",  "move",   "right",  "boy",   "old",
    "too",    "does",   "tell",    "set",   "three", "want",  "air",    "well",   "also",  "play",
    "small",  "end",    "put",     "home",  "read",  "hand",  "port",   "large",  "spell", "add"};

// A length drawn from [floor(len*(1-r)), floor(len*(1+r))], never below `min`.
int64_t draw_len(Rng& rng, int64_t len, double r, int64_t min) {
  const auto lo = static_cast<int64_t>(std::floor(static_cast<double>(len) * (1.0 - r)));
  const auto hi = static_cast<int64_t>(std::floor(static_cast<double>(len) * (1.0 + r)));
  const int64_t v = lo >= hi ? lo : rng.uniform_int(lo, hi);
  return v < min ? min : v;
}

void append_tokens(Rng& rng, const WorkloadConfig& c, int64_t n, std::vector<int32_t>* out) {
  for (int64_t i = 0; i < n; ++i) {
    out->push_back(static_cast<int32_t>(rng.uniform_int(c.min_token_id, c.vocab_size - 1)));
  }
}

void append_words(Rng& rng, int64_t n, std::string* out) {
  for (int64_t i = 0; i < n; ++i) {
    if (!out->empty()) out->push_back(' ');
    out->append(kWords[static_cast<size_t>(rng.uniform_int(0, kWords.size() - 1))]);
  }
}

// Appends n random tokens or words (by format) to *spec.
void append_random(Rng& rng, const WorkloadConfig& c, int64_t n, PromptSpec* spec) {
  if (c.format == PromptFormat::kTokenIds) {
    append_tokens(rng, c, n, &spec->token_ids);
  } else {
    append_words(rng, n, &spec->text);
  }
  spec->prompt_len += n;
}

std::vector<PromptSpec> random_prompts(const WorkloadConfig& c, Rng& rng) {
  std::vector<PromptSpec> out(static_cast<size_t>(c.num_prompts));
  for (PromptSpec& p : out) {
    const int64_t in_len = draw_len(rng, c.input_len, c.range_ratio, 1);
    p.output_len = draw_len(rng, c.output_len, c.range_ratio, 1);
    append_random(rng, c, in_len, &p);
  }
  return out;
}

std::vector<PromptSpec> shared_prefix_prompts(const WorkloadConfig& c, Rng& rng) {
  std::vector<PromptSpec> prefixes(static_cast<size_t>(c.num_groups));
  for (PromptSpec& p : prefixes) append_random(rng, c, c.prefix_len, &p);
  // Groups round-robin over the prompts, then a seeded shuffle so groups interleave at random.
  std::vector<int64_t> group_of(static_cast<size_t>(c.num_prompts));
  for (size_t i = 0; i < group_of.size(); ++i) group_of[i] = static_cast<int64_t>(i) % c.num_groups;
  for (size_t i = group_of.size(); i > 1; --i) {
    std::swap(group_of[i - 1], group_of[static_cast<size_t>(rng.uniform_int(0, i - 1))]);
  }
  std::vector<PromptSpec> out(static_cast<size_t>(c.num_prompts));
  for (size_t i = 0; i < out.size(); ++i) {
    PromptSpec& p = out[i];
    p = prefixes[static_cast<size_t>(group_of[i])];
    p.group_idx = group_of[i];
    const int64_t suffix = draw_len(rng, c.suffix_len, c.range_ratio, 1);
    p.output_len = draw_len(rng, c.output_len, c.range_ratio, 1);
    append_random(rng, c, suffix, &p);
  }
  return out;
}

std::vector<PromptSpec> rag_prompts(const WorkloadConfig& c, Rng& rng) {
  std::vector<std::string> docs(static_cast<size_t>(c.rag_num_docs));
  for (std::string& d : docs) append_words(rng, c.rag_doc_len, &d);
  std::vector<PromptSpec> out(static_cast<size_t>(c.num_prompts));
  std::vector<int64_t> pool(docs.size());
  for (PromptSpec& p : out) {
    for (size_t i = 0; i < pool.size(); ++i) pool[i] = static_cast<int64_t>(i);
    // A partial Fisher-Yates shuffle: the first M entries are M distinct documents in random order.
    for (int64_t i = 0; i < c.rag_docs_per_request; ++i) {
      const auto j = static_cast<size_t>(rng.uniform_int(i, static_cast<int64_t>(pool.size()) - 1));
      std::swap(pool[static_cast<size_t>(i)], pool[j]);
      p.doc_ids.push_back(pool[static_cast<size_t>(i)]);
      p.documents.push_back(docs[static_cast<size_t>(pool[static_cast<size_t>(i)])]);
    }
    p.output_len = draw_len(rng, c.output_len, c.range_ratio, 1);
    append_words(rng, c.rag_question_len, &p.text);
    p.prompt_len = c.rag_docs_per_request * c.rag_doc_len + c.rag_question_len;
  }
  return out;
}

Status check_len(const char* name, int64_t v, int64_t min) {
  if (v < min || v > kMaxLen) {
    return Status::invalid_argument(std::string(name) + " must be in [" + std::to_string(min) +
                                    ", " + std::to_string(kMaxLen) + "], got " + std::to_string(v));
  }
  return Status();
}

}  // namespace

std::string_view dataset_kind_name(DatasetKind kind) {
  switch (kind) {
    case DatasetKind::kRandom:
      return "random";
    case DatasetKind::kSharedPrefix:
      return "shared-prefix";
    case DatasetKind::kRag:
      return "rag";
    case DatasetKind::kLongDecode:
      return "long-decode";
  }
  return "?";
}

std::string_view prompt_format_name(PromptFormat format) {
  switch (format) {
    case PromptFormat::kTokenIds:
      return "token-ids";
    case PromptFormat::kText:
      return "text";
  }
  return "?";
}

Status WorkloadConfig::validate() const {
  if (num_prompts < 1 || num_prompts > kMaxPrompts) {
    return Status::invalid_argument("num-prompts must be in [1, " + std::to_string(kMaxPrompts) +
                                    "], got " + std::to_string(num_prompts));
  }
  if (!(range_ratio >= 0.0 && range_ratio < 1.0)) {
    return Status::invalid_argument("range-ratio must be in [0, 1), got " +
                                    std::to_string(range_ratio));
  }
  KEEL_TRY(check_len("output-len", output_len, 1));
  if (dataset == DatasetKind::kRandom || dataset == DatasetKind::kLongDecode) {
    KEEL_TRY(check_len("input-len", input_len, 1));
  } else if (dataset == DatasetKind::kRag) {
    KEEL_TRY(check_len("rag-doc-len", rag_doc_len, 1));
    KEEL_TRY(check_len("rag-question-len", rag_question_len, 1));
    if (rag_num_docs < 1 || rag_num_docs > 1'000'000) {
      return Status::invalid_argument("rag-num-docs must be in [1, 1000000], got " +
                                      std::to_string(rag_num_docs));
    }
    if (rag_docs_per_request < 1 || rag_docs_per_request > rag_num_docs) {
      return Status::invalid_argument(
          "rag-docs-per-request must be in [1, rag-num-docs=" + std::to_string(rag_num_docs) +
          "], got " + std::to_string(rag_docs_per_request));
    }
    if (format != PromptFormat::kText) {
      return Status::invalid_argument("the rag workload sends text (use --prompt-format text)");
    }
  } else {
    KEEL_TRY(check_len("prefix-len", prefix_len, 0));
    KEEL_TRY(check_len("suffix-len", suffix_len, 1));
    if (num_groups < 1 || num_groups > num_prompts) {
      return Status::invalid_argument(
          "num-groups must be in [1, num-prompts=" + std::to_string(num_prompts) + "], got " +
          std::to_string(num_groups));
    }
  }
  if (format == PromptFormat::kTokenIds) {
    if (min_token_id < 0 || vocab_size <= min_token_id || vocab_size > (int64_t{1} << 31) - 1) {
      return Status::invalid_argument("token ids need 0 <= min-token-id < vocab-size < 2^31, got " +
                                      std::to_string(min_token_id) + " and " +
                                      std::to_string(vocab_size));
    }
  }
  return Status();
}

Result<std::vector<PromptSpec>> generate_workload(const WorkloadConfig& config) {
  KEEL_TRY(config.validate());
  Rng rng(config.seed);
  switch (config.dataset) {
    case DatasetKind::kRandom:
    case DatasetKind::kLongDecode:
      return random_prompts(config, rng);
    case DatasetKind::kSharedPrefix:
      return shared_prefix_prompts(config, rng);
    case DatasetKind::kRag:
      return rag_prompts(config, rng);
  }
  return Status::internal("unknown dataset kind");
}

std::span<const std::string_view> prompt_words() { return kWords; }

}  // namespace keel::loadgen
