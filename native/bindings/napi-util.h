// napi-util — argument checks shared by the bindings.
//
// TypeScript validates first and owns the user-facing messages; these checks
// repeat the cheap ones so a caller that bypasses the TypeScript layer still
// gets a TypeError/RangeError with a stable `code`, never a crash. Errors are
// thrown as Napi::Error (C++ exceptions are enabled; node-addon-api converts
// them at the boundary, and NODE_ADDON_API_CPP_EXCEPTIONS_ALL converts any
// std::exception too, so none escapes).
//
// Hazard: while a worker is being terminated every Node-API call may fail and
// no exception can be thrown into JavaScript. Both builds define
// NODE_API_SWALLOW_UNTHROWABLE_EXCEPTIONS so node-addon-api drops such an
// exception instead of re-throwing it out of its own handler (which would
// reach std::terminate), and raw calls check their status before using what
// they return.
#pragma once

#include <napi.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "util/format-number.h"

namespace kvroute {

constexpr const char* kErrArgType = "ERR_KVROUTE_INVALID_ARG_TYPE";
constexpr const char* kErrArgValue = "ERR_KVROUTE_INVALID_ARG_VALUE";
constexpr const char* kErrUnknownInstance = "ERR_KVROUTE_UNKNOWN_INSTANCE";

[[noreturn]] inline void throwTypeError(Napi::Env env, const char* code, const std::string& message) {
  Napi::Error error = Napi::TypeError::New(env, message);
  error.Set("code", Napi::String::New(env, code));
  throw error;
}

[[noreturn]] inline void throwRangeError(Napi::Env env, const char* code, const std::string& message) {
  Napi::Error error = Napi::RangeError::New(env, message);
  error.Set("code", Napi::String::New(env, code));
  throw error;
}

inline double requireNumber(const Napi::Value& v, const char* field) {
  if (!v.IsNumber()) throwTypeError(v.Env(), kErrArgType, std::string(field) + " must be a number");
  return v.As<Napi::Number>().DoubleValue();
}

// A finite number in [min, max].
inline double requireInRange(const Napi::Value& v, const char* field, double min, double max) {
  const double x = requireNumber(v, field);
  if (!(x >= min && x <= max)) {
    throwRangeError(v.Env(), kErrArgValue,
                    std::string(field) + " must be between " + std::to_string(min) + " and " + std::to_string(max) +
                        ", got " + std::to_string(x));
  }
  return x;
}

// An integer in [min, max].
inline double requireInteger(const Napi::Value& v, const char* field, double min, double max) {
  const double x = requireInRange(v, field, min, max);
  if (x != std::floor(x)) {
    throwRangeError(v.Env(), kErrArgValue, std::string(field) + " must be an integer, got " + std::to_string(x));
  }
  return x;
}

template <typename T>
T* typedArrayData(const Napi::Value& v, napi_typedarray_type type, size_t minLength, const char* field) {
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != type) {
    throwTypeError(v.Env(), kErrArgType, std::string(field) + " has the wrong typed-array type");
  }
  auto array = v.As<Napi::TypedArrayOf<T>>();
  if (array.ElementLength() < minLength) {
    throwRangeError(v.Env(), kErrArgValue, std::string(field) + " is too short");
  }
  return array.Data();
}

// `v` as a typed array of `type`, or a TypeError naming `field` and the type it must be.
template <typename T>
Napi::TypedArrayOf<T> requireTypedArray(const Napi::Value& v, napi_typedarray_type type, const char* field,
                                        const char* typeName) {
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != type) {
    throwTypeError(v.Env(), kErrArgType, std::string(field) + " must be a " + typeName);
  }
  return v.As<Napi::TypedArrayOf<T>>();
}

// Copies a string's UTF-8 bytes into `out` (reused across calls). Lone
// surrogates become U+FFFD, as TextEncoder does.
inline void utf8Into(napi_env env, napi_value value, std::vector<char>& out) {
  size_t length = 0;
  if (napi_get_value_string_utf8(env, value, nullptr, 0, &length) != napi_ok) length = 0;
  out.resize(length + 1);
  if (napi_get_value_string_utf8(env, value, out.data(), out.size(), &length) != napi_ok) length = 0;
  out.resize(length);
}

}  // namespace kvroute
