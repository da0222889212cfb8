// The table of known pre-tokenizers and their regex sequences (see pre_tokenizer_spec.h).
//
// The regexes are those llama.cpp applies for each name. Where llama.cpp rewrote a Hugging Face
// regex for std::regex (case-insensitive contractions spelled '[sS]...), the rewritten form is
// kept so that "'" + U+017F and the Kelvin sign are not case-folded into contractions. The GPT-2
// regex gains its trailing "|\s+", which llama.cpp's hand-written matcher implements.
#include "tokenizer/pre_tokenizer_spec.h"

#include <array>

namespace keel::tokenizer {
namespace {

constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

constexpr std::string_view kLlama3Regex =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|)"
    R"(\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr std::string_view kQwen2Regex =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|)"
    R"(\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr std::string_view kQwen35Regex =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L})"
    R"(\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr std::array<std::string_view, 4> kDefaultRegexes = {
    R"([\p{P}\$\+<=>\^~\|]+)",
    kGpt2Regex,
    R"(\p{N}+)",
    R"([0-9][0-9][0-9])",
};
constexpr std::array<std::string_view, 1> kGpt2Regexes = {kGpt2Regex};
constexpr std::array<std::string_view, 1> kLlama3Regexes = {kLlama3Regex};
constexpr std::array<std::string_view, 1> kQwen2Regexes = {kQwen2Regex};
constexpr std::array<std::string_view, 1> kQwen35Regexes = {kQwen35Regex};

constexpr std::array<std::string_view, 6> kDeepseekLlmRegexes = {
    "[\r\n]",
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-)"
    R"(\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386})"
    R"(\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F})"
    R"(\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA})"
    R"(\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-)"
    R"(\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59})"
    R"(\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-)"
    R"(\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2})"
    R"(-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D})"
    R"(\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F})"
    R"(\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-)"
    R"(\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-)"
    R"(\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21})"
    R"(-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB})"
    R"(\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)",
    R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)",
    "\\s+$",
    R"([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)",
    "\\p{N}+",
};

constexpr std::array<std::string_view, 5> kDeepseekCoderRegexes = {
    "[\r\n]",      "\\s?\\p{L}+",
    "\\s?\\p{P}+", R"([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)",
    "\\p{N}",
};

constexpr std::array<std::string_view, 3> kFalconRegexes = {
    R"([\p{P}\$\+<=>\^~\|`]+)",
    kGpt2Regex,
    R"([0-9][0-9][0-9])",
};

constexpr std::array<std::string_view, 2> kStarcoderRegexes = {R"(\p{N})", kGpt2Regex};

constexpr std::array<std::string_view, 1> kBloomRegexes = {
    R"( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{964}\x{6D4}\x{60C})]+)"};

constexpr std::array<std::string_view, 2> kVikingRegexes = {
    R"( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{964}\x{6D4}\x{60C})]+)", R"(\p{N})"};

using K = PreTokenizerKind;
// name, kind, clean_spaces, ignore_merges, add_bos, no_bos
constexpr std::array kSpecs = {
    PreTokenizerSpec{"default", K::kDefault, true, false, false, false},
    PreTokenizerSpec{"llama3", K::kLlama3, true, true, true, false},
    PreTokenizerSpec{"llama-v3", K::kLlama3, true, true, true, false},
    PreTokenizerSpec{"llama-bpe", K::kLlama3, true, true, true, false},
    PreTokenizerSpec{"falcon3", K::kLlama3, true, true, true, false},
    PreTokenizerSpec{"falcon-h1", K::kLlama3, true, true, true, false},
    PreTokenizerSpec{"pixtral", K::kLlama3, true, true, true, false},
    PreTokenizerSpec{"midm-2.0", K::kLlama3, true, true, true, false},
    PreTokenizerSpec{"lfm2", K::kLlama3, true, true, true, false},
    PreTokenizerSpec{"dbrx", K::kLlama3, true, false, false, false},
    PreTokenizerSpec{"smaug-bpe", K::kLlama3, true, false, false, false},
    PreTokenizerSpec{"glm4", K::kLlama3, true, false, false, true},
    PreTokenizerSpec{"chatglm-bpe", K::kLlama3, true, false, false, true},
    PreTokenizerSpec{"deepseek-llm", K::kDeepseekLlm, false, false, false, false},
    PreTokenizerSpec{"deepseek-coder", K::kDeepseekCoder, false, false, false, false},
    PreTokenizerSpec{"falcon", K::kFalcon, true, false, false, false},
    PreTokenizerSpec{"mpt", K::kGpt2, true, false, false, false},
    PreTokenizerSpec{"starcoder", K::kStarcoder, true, false, false, false},
    PreTokenizerSpec{"refact", K::kStarcoder, true, false, false, false},
    PreTokenizerSpec{"command-r", K::kStarcoder, false, false, false, false},
    PreTokenizerSpec{"smollm", K::kStarcoder, false, false, false, false},
    PreTokenizerSpec{"codeshell", K::kStarcoder, true, false, false, false},
    PreTokenizerSpec{"exaone", K::kStarcoder, true, false, false, false},
    PreTokenizerSpec{"minerva-7b", K::kStarcoder, true, false, false, false},
    PreTokenizerSpec{"mellum2", K::kStarcoder, true, false, false, false},
    PreTokenizerSpec{"gpt-2", K::kGpt2, true, false, false, false},
    PreTokenizerSpec{"phi-2", K::kGpt2, true, false, false, false},
    PreTokenizerSpec{"jina-es", K::kGpt2, true, false, false, false},
    PreTokenizerSpec{"jina-de", K::kGpt2, true, false, false, false},
    PreTokenizerSpec{"jina-v2-es", K::kGpt2, true, false, false, false},
    PreTokenizerSpec{"jina-v2-de", K::kGpt2, true, false, false, false},
    PreTokenizerSpec{"gigachat", K::kGpt2, true, false, false, false},
    PreTokenizerSpec{"a.x-4.0", K::kGpt2, true, false, false, false},
    PreTokenizerSpec{"mellum", K::kGpt2, true, false, false, false},
    PreTokenizerSpec{"exaone4", K::kGpt2, true, false, false, false},
    PreTokenizerSpec{"olmo", K::kGpt2, true, false, false, false},
    PreTokenizerSpec{"jais", K::kGpt2, true, false, false, false},
    PreTokenizerSpec{"trillion", K::kGpt2, false, false, false, false},
    PreTokenizerSpec{"granite-docling", K::kGpt2, false, false, false, false},
    PreTokenizerSpec{"qwen2", K::kQwen2, false, false, false, false},
    PreTokenizerSpec{"deepseek-r1-qwen", K::kQwen2, false, false, false, false},
    PreTokenizerSpec{"kormo", K::kQwen2, false, false, false, false},
    PreTokenizerSpec{"f2llmv2", K::kQwen2, false, false, false, false},
    PreTokenizerSpec{"megrez", K::kQwen2, true, false, false, false},
    PreTokenizerSpec{"stablelm2", K::kQwen2, true, false, false, false},
    PreTokenizerSpec{"hunyuan", K::kQwen2, false, false, false, false},
    PreTokenizerSpec{"solar-open", K::kQwen2, false, false, false, false},
    PreTokenizerSpec{"grok-2", K::kQwen2, false, false, false, false},
    PreTokenizerSpec{"qwen35", K::kQwen35, false, false, false, false},
    PreTokenizerSpec{"bloom", K::kBloom, true, false, false, false},
    PreTokenizerSpec{"gpt3-finnish", K::kBloom, true, false, false, false},
    PreTokenizerSpec{"poro-chat", K::kBloom, false, false, false, false},
    PreTokenizerSpec{"viking", K::kViking, false, false, false, false},
};

}  // namespace

const PreTokenizerSpec* find_pre_tokenizer_spec(std::string_view pre) {
  for (const auto& spec : kSpecs) {
    if (spec.name == pre) return &spec;
  }
  return nullptr;
}

std::span<const PreTokenizerSpec> known_pre_tokenizers() { return kSpecs; }

std::span<const std::string_view> pre_tokenizer_regexes(PreTokenizerKind kind) {
  switch (kind) {
    case K::kDefault:
      return kDefaultRegexes;
    case K::kGpt2:
      return kGpt2Regexes;
    case K::kLlama3:
      return kLlama3Regexes;
    case K::kQwen2:
      return kQwen2Regexes;
    case K::kQwen35:
      return kQwen35Regexes;
    case K::kDeepseekLlm:
      return kDeepseekLlmRegexes;
    case K::kDeepseekCoder:
      return kDeepseekCoderRegexes;
    case K::kFalcon:
      return kFalconRegexes;
    case K::kStarcoder:
      return kStarcoderRegexes;
    case K::kBloom:
      return kBloomRegexes;
    case K::kViking:
      return kVikingRegexes;
  }
  return {};
}

}  // namespace keel::tokenizer
