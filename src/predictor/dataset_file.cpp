// save_samples / load_samples (see dataset_file.h).
#include "predictor/dataset_file.h"

#include <cstdio>
#include <fstream>
#include <sstream>

namespace keel::predictor {
namespace {

std::string header(const DatasetKey& k) {
  const DatasetSpec& s = k.spec;
  char t[32];
  std::snprintf(t, sizeof(t), "%.6g", double{s.temperature});
  std::ostringstream o;
  o << "keel-length-dataset v1 " << s.num_prompts << ' ' << s.min_prompt_tokens << ' '
    << s.max_prompt_tokens << ' ' << s.max_new_tokens << ' ' << t << ' ' << s.top_k << ' ' << s.seed
    << ' ' << s.heldout_every << ' ' << k.served_model << ' ' << k.side_model;
  return o.str();
}

}  // namespace

Status save_samples(const std::string& path, const DatasetKey& key,
                    const std::vector<LengthSample>& samples) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return Status::io_error("cannot write " + tmp);
    out << header(key) << '\n';
    for (const LengthSample& s : samples) {
      out << s.index << ' ' << s.generated;
      for (int32_t t : s.prompt) out << ' ' << t;
      out << '\n';
    }
    if (!out.flush()) return Status::io_error("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return Status::io_error("cannot rename " + tmp + " to " + path);
  }
  return Status();
}

Result<std::vector<LengthSample>> load_samples(const std::string& path, const DatasetKey& key) {
  std::ifstream in(path);
  if (!in) return Status::not_found("no dataset cache at " + path);
  std::string line;
  if (!std::getline(in, line) || line != header(key)) {
    return Status::invalid_argument("dataset cache " + path + " holds another dataset");
  }
  std::vector<LengthSample> out;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    LengthSample s;
    if (!(ls >> s.index >> s.generated)) {
      return Status::invalid_argument("dataset cache " + path + ": malformed line " +
                                      std::to_string(out.size() + 2));
    }
    for (int32_t t; ls >> t;) s.prompt.push_back(t);
    if (!ls.eof() || s.prompt.empty() || s.index != static_cast<int32_t>(out.size())) {
      return Status::invalid_argument("dataset cache " + path + ": malformed line " +
                                      std::to_string(out.size() + 2));
    }
    out.push_back(std::move(s));
  }
  if (static_cast<int64_t>(out.size()) != key.spec.num_prompts) {
    return Status::invalid_argument("dataset cache " + path + " holds " +
                                    std::to_string(out.size()) + " samples, expected " +
                                    std::to_string(key.spec.num_prompts));
  }
  return out;
}

}  // namespace keel::predictor
