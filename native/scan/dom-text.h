// dom-text — JavaScript's text of parsed JSON values (simdjson DOM elements),
// written into a PromptHasher.
//
// Why it exists: the request scanner (request-scan.h) rebuilds the prompt
// text the JavaScript path builds, where content parts and tool calls are
// JSON.stringify'd and a completions prompt array is String()'d, so each
// value must come out byte for byte as V8 writes it:
// - stringify: JSON.stringify. Numbers and strings as json-text.h writes them;
//   objects in V8's key order (array-index keys first, ascending, then the
//   others by first occurrence) with JSON.parse's duplicate rule (a key keeps
//   its first position and takes its last value).
// - join: Array.prototype.join(",") all the way down (null empty, objects
//   "[object Object]"), refusing an object with a toString member, for which
//   String() throws.
// - describe: describe() of src/core/errors.ts, for error messages.
//
// Complexity: linear in the text, plus O(k log k) per object of k members when
// it has array-index keys; duplicates are found in O(k^2) below 16 members and
// with a hash map above. Objects' members are staged on one shared stack.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hash/prompt-hash.h"
#include "scan/json-text.h"
#include "simdjson.h"

namespace kvroute {

using simdjson::dom::element;
using simdjson::dom::element_type;

// An element's value as JavaScript's Number.
double numberOf(const element& e);
bool isNumber(element_type t);
// Handles by value: a range-for over get_array().value_unsafe() would iterate
// a reference into a destroyed temporary.
simdjson::dom::array arrayOf(const element& e);
simdjson::dom::object objectOf(const element& e);
// How an offending value shows in a message; nullptr is `undefined`.
std::string describe(const element* e);

class DomTextWriter {
 public:
  // One object member being written.
  struct Member {
    std::string_view key;
    element value;
    uint32_t index;  // array index, when isIndex
    bool isIndex;
  };

  // `members` is scratch the writer keeps across calls (the caller's, reused).
  DomTextWriter(PromptHasher& hasher, std::vector<Member>& members) : hasher_(hasher), members_(members) {}

  void append(const char* p, size_t n) { hasher_.append(p, n); }
  void put(char c) { hasher_.append(&c, 1); }
  void text(std::string_view s) { hasher_.append(s.data(), s.size()); }
  void number(double x);
  void quoted(std::string_view s) { appendJsonQuoted(s, *this); }

  // JSON.stringify(e).
  void stringify(const element& e);
  // String(e) of an array: false when an object in it has a toString member.
  bool join(const element& e);

 private:
  void stringifyObject(const element& e);
  size_t dedupe(size_t base, size_t n);

  PromptHasher& hasher_;
  std::vector<Member>& members_;
};

}  // namespace kvroute
