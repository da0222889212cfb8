// `keel info MODEL.gguf`: the file's format, architecture and hyper-parameters (its metadata),
// tensor types and sizes, tokenizer, and the CPU features and kernel table keel would use.
// `keel info --cpu [--isa T]`: only the CPU part, with every table and which one is in use.
#include <cstdio>
#include <map>
#include <string>

#include "commands.h"
#include "core/cpu_features.h"
#include "gguf/reader.h"
#include "host/compute.h"
#include "kernels/kernels.h"

namespace keel::cli {
namespace {

std::string human_bytes(uint64_t v) {
  char buf[32];
  if (v >= (uint64_t{1} << 30)) {
    std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(v) / (1 << 30));
  } else if (v >= (uint64_t{1} << 20)) {
    std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(v) / (1 << 20));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(v) / 1024);
  }
  return buf;
}

// One-line rendering of a metadata value; arrays show their type, length and first items.
std::string render(const gguf::Value& v) {
  if (const auto* s = v.as_string()) {
    std::string out = *s;
    if (out.size() > 120) out = out.substr(0, 117) + "...";
    for (char& c : out) {
      if (c == '\n') c = ' ';
    }
    return "\"" + out + "\"";
  }
  if (const auto* a = v.as_array()) {
    std::string out = "[" + std::string(gguf::value_type_name(a->type)) + " × " +
                      std::to_string(a->items.size()) + "]";
    return out;
  }
  if (auto b = v.as_bool()) return *b ? "true" : "false";
  if (auto i = v.as_int()) return std::to_string(*i);
  if (auto d = v.as_double()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", *d);
    return buf;
  }
  return "?";
}

// The CPU, its features, the kernel tables it supports and the one a command would use (the best,
// or the one --isa / KEEL_ISA forces). Returns the exit code.
int print_cpu(const InfoOptions& opts) {
  const CpuFeatures cpu = detect_cpu_features();
  ComputeOptions compute;
  compute.isa = opts.isa;
  auto setup = host::setup_compute(compute);
  if (!setup.ok()) return report_error(setup.status());
  std::string supported;
  for (kernels::Isa isa : {kernels::Isa::kScalar, kernels::Isa::kAvx2, kernels::Isa::kAvx512}) {
    if (kernels::isa_supported(isa, cpu)) {
      supported += (supported.empty() ? "" : ", ") + std::string(kernels::isa_name(isa));
    }
  }
  std::printf(
      "cpu: %s\n  features: %s\n  kernel tables: %s\n  kernels in use: %s%s\n",
      cpu.model_name.c_str(), cpu.to_string().c_str(), supported.c_str(),
      std::string(kernels::isa_name(setup->isa)).c_str(),
      setup->isa == kernels::Isa::kAvx512 && cpu.avx512bf16 ? " (with AVX512-BF16 matmuls)" : "");
  return 0;
}

}  // namespace

int run_info(const InfoOptions& opts) {
  if (opts.cpu_only) return print_cpu(opts);
  if (opts.model_path.empty()) {
    std::fprintf(stderr, "keel: info needs a model file (or --cpu)\n");
    return 1;
  }
  auto file = gguf::GgufFile::open(opts.model_path, {.mode = gguf::DataMode::kNone});
  if (!file) {
    std::fprintf(stderr, "keel: %s\n", file.error().message().c_str());
    return 1;
  }
  std::printf("file: %s (GGUF v%u, %s, alignment %llu)\n", opts.model_path.c_str(), file->version(),
              human_bytes(file->file_size()).c_str(),
              static_cast<unsigned long long>(file->alignment()));
  auto arch = file->get_string("general.architecture");
  std::printf("architecture: %s\n", arch ? arch->c_str() : "(missing)");

  std::printf("\nmetadata (%zu keys):\n", file->metadata().size());
  for (const auto& kv : file->metadata()) {
    if (kv.key == "tokenizer.chat_template") {
      std::printf("  %-44s (%zu chars)\n", kv.key.c_str(), kv.value.as_string()->size());
      continue;
    }
    std::printf("  %-44s %s\n", kv.key.c_str(), render(kv.value).c_str());
  }

  struct TypeStats {
    size_t count = 0;
    uint64_t bytes = 0;
    int64_t elements = 0;
  };
  std::map<std::string, TypeStats> by_type;
  int64_t params = 0;
  for (const auto& t : file->tensors()) {
    auto& s = by_type[std::string(dtype_name(t.dtype))];
    ++s.count;
    s.bytes += t.num_bytes;
    s.elements += t.num_elements;
    params += t.num_elements;
  }
  std::printf("\ntensors: %zu, %.3f M parameters\n", file->tensors().size(),
              static_cast<double>(params) / 1e6);
  for (const auto& [name, s] : by_type) {
    std::printf("  %-6s %5zu tensors  %12s  %s\n", name.c_str(), s.count,
                human_bytes(s.bytes).c_str(),
                kernels::matmul_supports(*dtype_from_name(name)) ? "" : "(no matmul kernel)");
  }
  if (opts.list_tensors) {
    for (const auto& t : file->tensors()) {
      std::string shape;
      for (size_t i = 0; i < t.shape.size(); ++i) {
        shape += (i ? " x " : "") + std::to_string(t.shape[i]);
      }
      std::printf("  %-40s %-6s [%s] %s\n", t.name.c_str(),
                  std::string(dtype_name(t.dtype)).c_str(), shape.c_str(),
                  human_bytes(t.num_bytes).c_str());
    }
  }

  std::printf("\n");
  return print_cpu(opts);
}

}  // namespace keel::cli
