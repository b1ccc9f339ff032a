#include "scan/dom-text.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "scan/json-text.h"

namespace kvroute {
namespace {

constexpr size_t kSmallObject = 16;  // members: quadratic duplicate check below this

}  // namespace

// An element's value as JavaScript's Number: integers convert with
// round-to-nearest, which is what JSON.parse's decimal conversion yields.
double numberOf(const element& e) {
  switch (e.type()) {
    case element_type::INT64:
      return static_cast<double>(e.get_int64().value_unsafe());
    case element_type::UINT64:
      return static_cast<double>(e.get_uint64().value_unsafe());
    default:
      return e.get_double().value_unsafe();
  }
}

// Handles by value: a range-for over get_array().value_unsafe() would iterate
// a reference into a destroyed temporary.
simdjson::dom::array arrayOf(const element& e) { return e.get_array().value_unsafe(); }
simdjson::dom::object objectOf(const element& e) { return e.get_object().value_unsafe(); }

bool isNumber(element_type t) {
  return t == element_type::INT64 || t == element_type::UINT64 || t == element_type::DOUBLE;
}

// describe() of src/core/errors.ts: how an offending value shows in a message.
std::string describe(const element* e) {
  if (e == nullptr) return "undefined";
  char num[kJsNumberMaxChars];
  switch (e->type()) {
    case element_type::STRING:
      return describeJsString(e->get_string().value_unsafe());
    case element_type::NULL_VALUE:
      return "null";
    case element_type::ARRAY:
      return "an array";
    case element_type::OBJECT:
      return "an object";
    case element_type::BOOL:
      return e->get_bool().value_unsafe() ? "true" : "false";
    default:
      return std::string(num, formatJsNumber(numberOf(*e), num));
  }
}

void DomTextWriter::number(double x) {
  char buf[kJsNumberMaxChars];
  hasher_.append(buf, formatJsNumber(x, buf));
}

void DomTextWriter::stringify(const element& e) {
  switch (e.type()) {
    case element_type::ARRAY: {
      put('[');
      bool first = true;
      for (element x : arrayOf(e)) {
        if (!first) put(',');
        first = false;
        stringify(x);
      }
      put(']');
      break;
    }
    case element_type::OBJECT:
      stringifyObject(e);
      break;
    case element_type::STRING:
      quoted(e.get_string().value_unsafe());
      break;
    case element_type::BOOL:
      text(e.get_bool().value_unsafe() ? "true" : "false");
      break;
    case element_type::NULL_VALUE:
      text("null");
      break;
    default: {
      const double x = numberOf(e);
      if (std::isfinite(x)) {
        number(x);
      } else {
        text("null");  // unreachable: such numbers take the fallback
      }
    }
  }
}

bool DomTextWriter::join(const element& e) {
  bool first = true;
  for (element x : arrayOf(e)) {
    if (!first) put(',');
    first = false;
    switch (x.type()) {
      case element_type::NULL_VALUE:
        break;
      case element_type::STRING:
        text(x.get_string().value_unsafe());
        break;
      case element_type::BOOL:
        text(x.get_bool().value_unsafe() ? "true" : "false");
        break;
      case element_type::ARRAY:
        if (!join(x)) return false;
        break;
      case element_type::OBJECT:
        for (auto field : objectOf(x)) {
          if (field.key == "toString") return false;
        }
        text("[object Object]");
        break;
      default:
        number(numberOf(x));
    }
  }
  return true;
}

void DomTextWriter::stringifyObject(const element& e) {
  const size_t base = members_.size();
  bool anyIndex = false;
  for (auto field : objectOf(e)) {
    Member m{field.key, field.value, 0, false};
    m.isIndex = arrayIndexKey(field.key, &m.index);
    anyIndex = anyIndex || m.isIndex;
    members_.push_back(m);
  }
  size_t n = members_.size() - base;
  if (n > 1) n = dedupe(base, n);
  if (anyIndex) {
    std::stable_sort(members_.begin() + static_cast<std::ptrdiff_t>(base),
                     members_.begin() + static_cast<std::ptrdiff_t>(base + n), [](const Member& a, const Member& b) {
                       if (a.isIndex != b.isIndex) return a.isIndex;
                       return a.isIndex && a.index < b.index;
                     });
  }
  put('{');
  for (size_t k = 0; k < n; ++k) {
    const Member m = members_[base + k];  // a copy: stringify() may grow members_
    if (k > 0) put(',');
    quoted(m.key);
    put(':');
    stringify(m.value);
  }
  put('}');
  members_.resize(base);
}

size_t DomTextWriter::dedupe(size_t base, size_t n) {
  Member* m = members_.data() + base;
  size_t kept = 0;
  if (n <= kSmallObject) {
    for (size_t i = 0; i < n; ++i) {
      size_t j = 0;
      while (j < kept && m[j].key != m[i].key) ++j;
      if (j < kept) {
        m[j].value = m[i].value;
      } else {
        m[kept++] = m[i];
      }
    }
  } else {
    std::unordered_map<std::string_view, size_t> seen;
    seen.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      auto [it, fresh] = seen.emplace(m[i].key, kept);
      if (fresh) {
        m[kept++] = m[i];
      } else {
        m[it->second].value = m[i].value;
      }
    }
  }
  members_.resize(base + kept);
  return kept;
}

}  // namespace kvroute
