// json-bytes — scalar passes over raw JSON bytes, beside simdjson's parse.
//
// Why it exists: simdjson's DOM has no byte offsets and its errors are
// coarse, but the request scanner (request-scan.h) needs both:
// - Error classification. simdjson reports NUMBER_ERROR for a malformed number
//   and for one out of range (1e400, which JSON.parse accepts), STRING_ERROR
//   for a malformed escape and for an unpaired surrogate (which JSON.parse
//   accepts). hasMalformedNumber / hasMalformedEscape find a token that proves
//   the body invalid; without one, the scanner hands the body to JavaScript.
// - Top-level member spans. stripRanges finds the byte ranges that drop
//   chosen members (hash_ids) with their separating commas, so the body can
//   be forwarded as the original bytes minus those ranges.
// Both run only on those paths (an error; a strip with hash_ids present), over
// bytes that passed simdjson's stage 1 (every string closed), resp. its whole
// validation.
//
// Complexity: O(len); strings are skipped with memchr.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvroute {

// The index after the string starting at bytes[i] == '"' (or len).
size_t skipString(const uint8_t* bytes, size_t len, size_t i);

// Whether some number token outside strings is malformed (proves the body
// invalid JSON).
bool hasMalformedNumber(const uint8_t* bytes, size_t len);

// Whether some string holds an escape JSON does not have (proves the body
// invalid JSON).
bool hasMalformedEscape(const uint8_t* bytes, size_t len);

// Appends to `out` the [start, end) ranges that drop the top-level members
// flagged in `drop` (one flag per member, in document order) from the valid
// JSON object `bytes`, each with one separating comma; adjacent ranges merge.
void stripRanges(const uint8_t* bytes, size_t len, const std::vector<bool>& drop, std::vector<size_t>& out);

// Bytes of `len` minus `strip`'s ranges, written to `out` (len bytes); returns
// the count written.
size_t copyStripped(const uint8_t* bytes, size_t len, const std::vector<size_t>& strip, uint8_t* out);

}  // namespace kvroute
