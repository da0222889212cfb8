// libFuzzer target: the state store's on-disk formats (state/entry_format.h) as a restarted
// process finds them. Input: one flag byte, then the bytes of a file. Bit 0 rewrites the entry
// header to match the bytes after it (so the fuzzer gets past the checksums to the length and
// payload checks). Checks: decode_entry accepts exactly the files encode_entry_header would
// write (header + payload, nothing more or less); scan_frames' intact prefix is exactly the
// re-encoding of the frames it returns, it reports a problem iff bytes are left over, and a
// frame appended after the intact prefix is read back whole.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "state/entry_format.h"

using keel::state::decode_entry;
using keel::state::encode_entry_header;
using keel::state::encode_frame;
using keel::state::kEntryHeaderBytes;
using keel::state::scan_frames;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t flags = data[0];
  std::string file(reinterpret_cast<const char*>(data + 1), size - 1);
  if ((flags & 1) && file.size() >= kEntryHeaderBytes) {
    file.replace(0, kEntryHeaderBytes, encode_entry_header(file.substr(kEntryHeaderBytes)));
  }
  auto entry = decode_entry(file, "fuzz");
  if (entry.ok()) {
    if (encode_entry_header(*entry) + std::string(*entry) != file) std::abort();
  } else if (file.size() >= kEntryHeaderBytes &&
             encode_entry_header(std::string_view(file).substr(kEntryHeaderBytes)) ==
                 file.substr(0, kEntryHeaderBytes)) {
    std::abort();  // a well-formed entry refused
  }

  const keel::state::FrameScan scan = scan_frames(file);
  if (scan.intact_bytes > file.size()) std::abort();
  std::string again;
  for (std::string_view p : scan.payloads) again += encode_frame(p);
  if (again != file.substr(0, scan.intact_bytes)) std::abort();
  if (scan.problem.empty() != (scan.intact_bytes == file.size())) std::abort();
  // The store's repair: the intact prefix kept, the next append read back whole.
  const std::string repaired = file.substr(0, scan.intact_bytes) + encode_frame("next");
  const keel::state::FrameScan after = scan_frames(repaired);
  if (!after.problem.empty() || after.payloads.size() != scan.payloads.size() + 1 ||
      after.payloads.back() != "next") {
    std::abort();
  }
  return 0;
}
